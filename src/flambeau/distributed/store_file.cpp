// FileStore, c10d's file-backed store: the processes sharing a file append records to it
// under an exclusive flock and read by scanning what was appended since their last look.
// get/wait poll the file every millisecond up to the timeout. The last of world_size users to
// destroy its store removes the file.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "flambeau/distributed/store.h"
#include "flambeau/distributed/store_internal.h"

// Note [FileStore format]
// The file starts with the 8 bytes "FLBFS01\n", then records: u8 type ('S' set a key,
// 'D' delete a key, 'I' set an internal counter), u32 key length, key, u32 value length,
// value (lengths little-endian). Records are only appended, each with one write() under
// LOCK_EX; a reader parses complete records past its offset, so the last value wins.
// The internal counter "finished" counts the stores destroyed so far.

namespace flambeau::distributed {
namespace {

using detail::errno_text;
using detail::get_u32;
using detail::put_u32;

constexpr char kMagic[8] = {'F', 'L', 'B', 'F', 'S', '0', '1', '\n'};
constexpr Millis kPollInterval{1};

// flock held for a scope.
class FileLock {
 public:
  FileLock(int fd, int how, const std::string& op, const std::string& path) : fd_(fd) {
    while (::flock(fd, how) != 0) {
      if (errno != EINTR)
        throw DistStoreError("[" + op + "] could not lock " + path + ": " + errno_text(errno));
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

struct FileStore::Impl {
  std::string path;
  int world_size = -1;
  int fd = -1;
  std::mutex mu;      // threads sharing this object (flock does not order them)
  uint64_t pos = 0;   // bytes of the file parsed so far
  std::unordered_map<std::string, Bytes> map, internal;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  // Parses what was appended since the last look (mu held). Locks the file shared unless
  // the caller holds it already.
  void refresh(const std::string& op, bool locked) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      throw DistStoreError("[" + op + "] could not stat " + path + ": " + errno_text(errno));
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size == pos) return;
    if (!locked) {
      FileLock lock(fd, LOCK_SH, op, path);
      return refresh(op, true);
    }
    if (size < pos) {  // truncated by someone: start over
      pos = 0;
      map.clear();
      internal.clear();
    }
    std::string buf(size - pos, '\0');
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(pos + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw DistStoreError("[" + op + "] could not read " + path + ": " + errno_text(errno));
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    buf.resize(got);
    size_t q = 0;
    auto bad = [&](uint64_t at) {
      return DistStoreError("[" + op + "] " + path + " is not a FileStore file (bad data at byte " +
                            std::to_string(at) + ")");
    };
    if (pos == 0) {
      if (buf.size() < sizeof(kMagic)) return;  // being created
      if (std::memcmp(buf.data(), kMagic, sizeof(kMagic)) != 0) throw bad(0);
      q = sizeof(kMagic);
    }
    for (;;) {
      if (buf.size() - q < 5) break;
      const char type = buf[q];
      if (type != 'S' && type != 'D' && type != 'I') throw bad(pos + q);
      const uint64_t klen = get_u32(buf.data() + q + 1);
      if (buf.size() - q - 5 < klen + 4) break;
      const uint64_t vlen = get_u32(buf.data() + q + 5 + klen);
      if (buf.size() - q - 9 - klen < vlen) break;
      std::string key(buf.data() + q + 5, klen);
      const char* v = buf.data() + q + 9 + klen;
      if (type == 'S') map[key] = Bytes(v, v + vlen);
      else if (type == 'D') map.erase(key);
      else internal[key] = Bytes(v, v + vlen);
      q += 9 + klen + vlen;
    }
    pos += q;
  }

  // Appends one record (mu and LOCK_EX held, refreshed) and applies it.
  void append(const std::string& op, char type, const std::string& key, const Bytes& value) {
    if (key.size() > UINT32_MAX || value.size() > UINT32_MAX)
      throw DistStoreError("[" + op + "] a key or value of 4 GiB or more cannot be stored");
    std::string rec;
    rec.reserve(9 + key.size() + value.size());
    rec.push_back(type);
    put_u32(rec, static_cast<uint32_t>(key.size()));
    rec += key;
    put_u32(rec, static_cast<uint32_t>(value.size()));
    rec.append(value.begin(), value.end());
    write_all(op, rec);
    pos += rec.size();
    if (type == 'S') map[key] = value;
    else if (type == 'D') map.erase(key);
    else internal[key] = value;
  }

  void write_all(const std::string& op, const std::string& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::write(fd, b.data() + done, b.size() - done);  // O_APPEND
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw DistStoreError("[" + op + "] could not write " + path + ": " + errno_text(errno));
      done += static_cast<size_t>(n);
    }
  }

  int64_t add(const std::string& op, std::unordered_map<std::string, Bytes>& m, char type,
              const std::string& key, int64_t delta) {
    auto it = m.find(key);
    int64_t result = 0;
    std::string error;
    if (!detail::add_to_counter(key, it == m.end() ? nullptr : &it->second, delta, &result,
                                &error))
      throw DistStoreError("[" + op + "] " + error);
    append(op, type, key, detail::counter_bytes(result));
    return result;
  }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!map.count(k)) m.push_back(k);
    return m;
  }

  // Polls until every key is set; returns the value of keys[0] when want_value.
  Bytes wait_for(const std::string& op, const std::vector<std::string>& keys, Millis timeout,
                 bool want_value) {
    const auto deadline = detail::Deadline::after(timeout);
    for (;;) {
      {
        std::lock_guard<std::mutex> guard(mu);
        refresh(op, false);
        if (missing(keys).empty()) return want_value ? map.at(keys[0]) : Bytes{};
        if (deadline.expired())
          throw DistStoreError(detail::timeout_message(op, timeout, missing(keys)));
      }
      const int left = deadline.poll_ms();
      std::this_thread::sleep_for(left < 0 ? kPollInterval
                                           : std::min(kPollInterval, Millis(left)));
    }
  }
};

FileStore::FileStore(std::string path, int world_size) : impl_(std::make_unique<Impl>()) {
  FLB_CHECK(world_size == -1 || world_size > 0, ValueError,
            "[FileStore] world_size must be positive or -1, got ", world_size);
  impl_->path = std::move(path);
  impl_->world_size = world_size;
  impl_->fd = ::open(impl_->path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (impl_->fd < 0)
    throw DistStoreError("[FileStore] could not open " + impl_->path + ": " + errno_text(errno));
  std::lock_guard<std::mutex> guard(impl_->mu);
  FileLock lock(impl_->fd, LOCK_EX, "FileStore", impl_->path);
  struct stat st {};
  if (::fstat(impl_->fd, &st) == 0 && st.st_size == 0)
    impl_->write_all("FileStore", std::string(kMagic, sizeof(kMagic)));
  impl_->refresh("FileStore", true);
}

FileStore::~FileStore() {
  // Count this user out; the last one removes the file. A destructor does not throw.
  try {
    std::lock_guard<std::mutex> guard(impl_->mu);
    FileLock lock(impl_->fd, LOCK_EX, "FileStore", impl_->path);
    impl_->refresh("FileStore", true);
    const int64_t finished = impl_->add("FileStore", impl_->internal, 'I', "finished", 1);
    if (impl_->world_size > 0 && finished >= impl_->world_size) ::unlink(impl_->path.c_str());
  } catch (...) {
  }
}

const std::string& FileStore::path() const { return impl_->path; }

void FileStore::set(const std::string& key, const Bytes& value) {
  const std::string op = "FileStore.set";
  std::lock_guard<std::mutex> guard(impl_->mu);
  FileLock lock(impl_->fd, LOCK_EX, op, impl_->path);
  impl_->refresh(op, true);
  impl_->append(op, 'S', key, value);
}

Bytes FileStore::get(const std::string& key) {
  return impl_->wait_for("FileStore.get", {key}, timeout_, true);
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string op = "FileStore.add";
  std::lock_guard<std::mutex> guard(impl_->mu);
  FileLock lock(impl_->fd, LOCK_EX, op, impl_->path);
  impl_->refresh(op, true);
  return impl_->add(op, impl_->map, 'S', key, delta);
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected,
                             const Bytes& desired) {
  const std::string op = "FileStore.compare_set";
  std::lock_guard<std::mutex> guard(impl_->mu);
  FileLock lock(impl_->fd, LOCK_EX, op, impl_->path);
  impl_->refresh(op, true);
  auto it = impl_->map.find(key);
  if (it == impl_->map.end() ? !expected.empty() : it->second != expected)
    return it == impl_->map.end() ? expected : it->second;  // c10d's answers
  impl_->append(op, 'S', key, desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  impl_->wait_for("FileStore.wait", keys, timeout, false);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->refresh("FileStore.check", false);
  return impl_->missing(keys).empty();
}

bool FileStore::delete_key(const std::string& key) {
  const std::string op = "FileStore.delete_key";
  std::lock_guard<std::mutex> guard(impl_->mu);
  FileLock lock(impl_->fd, LOCK_EX, op, impl_->path);
  impl_->refresh(op, true);
  if (!impl_->map.count(key)) return false;
  impl_->append(op, 'D', key, {});
  return true;
}

int64_t FileStore::num_keys() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->refresh("FileStore.num_keys", false);
  return static_cast<int64_t>(impl_->map.size());
}

}  // namespace flambeau::distributed
