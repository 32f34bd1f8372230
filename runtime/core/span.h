#pragma once

#include <cstddef>
#include <type_traits>

namespace executorch {
namespace runtime {

// A non-owning view of `size` contiguous T's.
template <typename T>
class Span {
 public:
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  // A view of mutable elements is also a view of const ones.
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_const_v<U>>>
  constexpr Span(Span<U> other) : data_(other.data()), size_(other.size()) {}
  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace runtime
}  // namespace executorch
