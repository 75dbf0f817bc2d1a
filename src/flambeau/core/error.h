// Exceptions raised by flambeau. Every message starts with the op in brackets,
// e.g. "[add] shapes (3, 4) and (5,) cannot be broadcast".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace flambeau {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class IndexError : public Error {
 public:
  using Error::Error;
};
class ValueError : public Error {
 public:
  using Error::Error;
};
class TypeError : public Error {
 public:
  using Error::Error;
};
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
// A numerical failure of a linear-algebra routine (a singular matrix, one not
// positive-definite): torch.linalg.LinAlgError, a RuntimeError.
class LinAlgError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... A>
std::string str_cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}
}  // namespace detail

}  // namespace flambeau

// FLB_CHECK(cond, ErrorType, message parts...): throws ErrorType(message) when cond is false.
#define FLB_CHECK(cond, ErrT, ...) \
  do {                             \
    if (!(cond)) [[unlikely]]      \
      throw ::flambeau::ErrT(::flambeau::detail::str_cat(__VA_ARGS__)); \
  } while (0)
