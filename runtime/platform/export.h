#pragma once

// Every library is compiled with -fvisibility=hidden; EXECUTORCH_API marks what a library exports.
#if defined(_WIN32)
#define EXECUTORCH_API __declspec(dllexport)
#else
#define EXECUTORCH_API __attribute__((visibility("default")))
#endif
