#pragma once

#include <new>
#include <type_traits>
#include <utility>

#include <executorch/runtime/core/error.h>

namespace executorch {
namespace runtime {

// A value or an Error. Failures cross library boundaries as values, never as exceptions.
template <typename T>
class Result final {
 public:
  Result(T&& value) : ok_(true) { new (&value_) T(std::move(value)); }             // NOLINT
  Result(const T& value) : ok_(true) { new (&value_) T(value); }                    // NOLINT
  Result(Error error) : ok_(false), error_(error == Error::Ok ? Error::Internal : error) {}  // NOLINT
  Result(Result&& other) noexcept : ok_(other.ok_) {
    if (ok_) {
      new (&value_) T(std::move(other.value_));
    } else {
      error_ = other.error_;
    }
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&&) = delete;
  ~Result() {
    if (ok_) value_.~T();
  }

  bool ok() const { return ok_; }
  Error error() const { return ok_ ? Error::Ok : error_; }
  T& get() { return value_; }
  const T& get() const { return value_; }
  T& operator*() { return value_; }
  T* operator->() { return &value_; }

 private:
  bool ok_;
  union {
    T value_;
    Error error_;
  };
};

}  // namespace runtime
}  // namespace executorch

// Returns the error of `expr` (an Error or a Result) from the enclosing function if it failed.
#define ET_TRY(expr)                                          \
  do {                                                        \
    const ::executorch::runtime::Error et_try_error__ =       \
        ::executorch::runtime::internal::error_of(expr);      \
    if (et_try_error__ != ::executorch::runtime::Error::Ok) { \
      return et_try_error__;                                  \
    }                                                         \
  } while (0)

namespace executorch {
namespace runtime {
namespace internal {
inline Error error_of(Error e) { return e; }
template <typename T>
Error error_of(const Result<T>& r) {
  return r.error();
}
}  // namespace internal
}  // namespace runtime
}  // namespace executorch
