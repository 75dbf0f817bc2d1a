// Stand-in for gloo/common/memory.h, which Debian's libgloo-dev (0.0~git20220518) leaves out
// although gloo/transport/tcp/{pair,unbound_buffer}.h include it. Only gloo_pair_failure.cpp
// sees it (CMake adds this folder to that file alone, and only when the header is missing).
// Gloo's three pointer boxes hold one std::shared_ptr or std::weak_ptr each; these hold the
// same, so the tcp classes that embed them keep Gloo's layout. We only ever lock a weak box.
#pragma once
#include <memory>

namespace gloo {

template <typename T>
class ShareableNonOwningPtr;
template <typename T>
class NonOwningPtr;

// Weak reference handed to the I/O thread; Gloo's own code builds and copies these.
template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& root) : ptr_(root.ptr_) {}

 protected:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

// Root reference embedded in an UnboundBuffer (built and destroyed inside libgloo only).
template <typename T>
class ShareableNonOwningPtr final {
 public:
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;

 protected:
  std::shared_ptr<T> ptr_;
  friend class WeakNonOwningPtr<T>;
};

// A short-lived strong reference: empty when the object is gone.
template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& weak) : ptr_(weak.ptr_.lock()) {}
  T* operator->() const noexcept { return ptr_.get(); }
  T& operator*() const noexcept { return *ptr_; }
  explicit operator bool() const noexcept { return bool(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

}  // namespace gloo
