# Included by every folder that compiles .cu files (plugins/cuda, tests/cuda).
# CMake 3.25 knows nvcc's dialect flags only up to C++17, so CUDA_STANDARD 20
# fails to generate; nvcc 12+ takes -std=c++20. (CMake >= 3.26 knows it.)
enable_language(CUDA)
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
   AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
