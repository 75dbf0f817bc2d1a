// See text_file.h.
#include "flambeau/io/text_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "flambeau/core/error.h"

namespace flambeau::io {

void write_text_file(const std::string& path, const std::string& text, const char* op) {
  static std::atomic<int64_t> writes{0};  // two threads may write the same file at once
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    FLB_CHECK(f.good(), Error, "[", op, "] cannot open ", tmp, " for writing: ", std::strerror(errno));
    f << text;
    f.flush();
    if (!f.good()) {
      f.close();
      std::remove(tmp.c_str());
      throw Error(detail::str_cat("[", op, "] writing ", tmp, " failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(detail::str_cat("[", op, "] cannot rename ", tmp, " to ", path, ": ", why));
  }
}

}  // namespace flambeau::io
