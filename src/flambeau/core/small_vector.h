// SmallVec: a vector of trivially copyable values kept inline up to N elements.
// Shapes and strides use it so that making a tensor does not touch the heap for them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

namespace flambeau {

template <class T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVec() = default;
  SmallVec(std::initializer_list<T> v) { assign(v.begin(), v.size()); }
  SmallVec(const std::vector<T>& v) { assign(v.data(), v.size()); }
  SmallVec(const T* p, size_t n) { assign(p, n); }
  explicit SmallVec(size_t n, T value = T()) {
    resize(n);
    std::fill(begin(), end(), value);
  }
  SmallVec(const SmallVec& o) { assign(o.data(), o.size()); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = std::max(n, 2 * capacity_);
    std::unique_ptr<T[]> h(new T[cap]);
    std::memcpy(h.get(), data(), size_ * sizeof(T));
    heap_ = std::move(h);
    capacity_ = cap;
  }
  void push_back(T v) {
    reserve(size_ + 1);
    data()[size_++] = v;
  }
  void insert(size_t pos, T v) {
    reserve(size_ + 1);
    T* d = data();
    std::memmove(d + pos + 1, d + pos, (size_ - pos) * sizeof(T));
    d[pos] = v;
    ++size_;
  }
  void erase(size_t pos) {
    T* d = data();
    std::memmove(d + pos, d + pos + 1, (size_ - pos - 1) * sizeof(T));
    --size_;
  }
  void clear() { size_ = 0; }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  void assign(const T* p, size_t n) {
    size_ = 0;
    reserve(n);
    std::memcpy(data(), p, n * sizeof(T));
    size_ = n;
  }
  T inline_[N];
  std::unique_ptr<T[]> heap_;
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace flambeau
