# Written over by ci/python_wheel.sh with the CMake project's version (the one
# source of it); this value marks a package imported from the source tree.
__version__ = "0.0.0+source"
