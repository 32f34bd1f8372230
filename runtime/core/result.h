#pragma once

#include <new>
#include <type_traits>
#include <utility>

#include <executorch/runtime/core/error.h>

namespace executorch {
namespace runtime {

namespace internal {
// Reports get() on a failed Result, a caller's bug, and aborts: reading the value would be garbage.
[[noreturn]] EXECUTORCH_API void get_on_error(Error error);
}  // namespace internal

// A value or an Error. Failures cross library boundaries as values, never as exceptions.
// Discarding one is a warning; get() on an error aborts, naming the error.
template <typename T>
class [[nodiscard]] Result final {
 public:
  Result(T&& value) : ok_(true) { new (&value_) T(std::move(value)); }                       // NOLINT
  Result(const T& value) : ok_(true) { new (&value_) T(value); }                             // NOLINT
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
  T& get() {
    if (!ok_) internal::get_on_error(error_);
    return value_;
  }
  const T& get() const {
    if (!ok_) internal::get_on_error(error_);
    return value_;
  }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

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
#define ET_TRY(expr)                                                                                     \
  do {                                                                                                   \
    const ::executorch::runtime::Error et_try_error__ = ::executorch::runtime::internal::error_of(expr); \
    if (et_try_error__ != ::executorch::runtime::Error::Ok) {                                            \
      return et_try_error__;                                                                             \
    }                                                                                                    \
  } while (0)

// Declares `lhs` (`auto x`, `Foo* x`) from the value of the Result `expr`, or returns its error from
// the enclosing function: ET_TRY_ASSIGN(auto program, Program::load(std::move(loader)));
#define ET_TRY_ASSIGN(lhs, expr) ET_TRY_ASSIGN_IMPL_(ET_TRY_CONCAT_(et_try_result_, __LINE__), lhs, expr)
#define ET_TRY_CONCAT_(a, b) ET_TRY_CONCAT2_(a, b)
#define ET_TRY_CONCAT2_(a, b) a##b
#define ET_TRY_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                        \
  if (!tmp.ok()) return tmp.error();        \
  lhs = std::move(tmp.get())

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
