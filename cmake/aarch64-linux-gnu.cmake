# Cross build for 64-bit Arm (Debian's g++-aarch64-linux-gnu and arm64 multiarch -dev
# packages, see scripts/install-deps-arm64); tests run under qemu-user. `make test-arm`.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers are shared between architectures (/usr/include); libraries and CMake package
# files come from the arm64 multiarch directories only.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# ctest (and gtest's test discovery at build time) run the binaries through qemu; -L /
# finds the arm64 loader and libraries that multiarch installed under /lib and /usr/lib.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
