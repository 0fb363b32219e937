"""Only what pyproject.toml cannot say: the wheel carries native libraries, so
it is a platform wheel (its files at the wheel's root, as a platlib package),
tagged py3-none-linux_x86_64: any Python 3, since nothing is compiled against
Python."""
from setuptools import Distribution, setup

try:  # setuptools >= 70.1 carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools: the wheel package's
    from wheel.bdist_wheel import bdist_wheel


class NativeLibraries(Distribution):
    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=NativeLibraries, cmdclass={"bdist_wheel": PlatformWheel})
