// Force-included into the C and C++ sources built from Debian's tarballs: functions whose newest glibc
// versions (from the build root's glibc) are past the wheel's floor bind to their oldest ones. (No
// header is included here: the sources' own feature macros must come first.)
#pragma once
#if defined(__x86_64__) && defined(__linux__)
__asm__(".symver fmodf,fmodf@GLIBC_2.2.5");
__asm__(".symver atan2f,atan2f@GLIBC_2.2.5");
__asm__(".symver sqrtf,sqrtf@GLIBC_2.2.5");
#endif
