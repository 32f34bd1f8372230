// Force-included into the C sources built from Debian's tarballs: functions whose newest glibc
// versions (from the build root's glibc) are past the wheel's floor bind to their oldest ones.
#pragma once
#if defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver fmodf,fmodf@GLIBC_2.2.5");
#endif
