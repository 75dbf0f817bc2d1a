// The rendezvous stores (HashStore, FileStore, TCPStore, PrefixStore): c10d's semantics of
// set/get/add/compare_set/wait/check/delete_key/num_keys on every store, timeouts naming the
// keys, TCPStore with several clients, lost servers, bad peers and ports, FileStore shared by
// objects and by a forked process. Loopback only; every wait is bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "flambeau/distributed/store.h"

using namespace flambeau::distributed;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kHost = "127.0.0.1";

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The message of the E that f throws (a test failure if it throws nothing or something else).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A fresh directory, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "flb_store_XXXXXX").string();
    path = ::mkdtemp(t.data()) ? t : std::string();
    if (path.empty()) ADD_FAILURE() << "mkdtemp failed";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

TCPStoreOptions master_options(Millis timeout = Millis(2000)) {
  TCPStoreOptions o;
  o.is_master = true;
  o.timeout = timeout;
  return o;
}
TCPStoreOptions client_options(int port, Millis timeout = Millis(2000)) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  return o;
}

// A port that nobody listens on (bound then released).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A raw loopback connection to port (-1 on failure).
int raw_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the peer closes fd within timeout_ms (reading and dropping what it sends).
bool closed_by_peer(int fd, int timeout_ms) {
  const auto start = Clock::now();
  char buf[256];
  while (ms_since(start) < timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

void send_bytes(int fd, const std::string& b) {
  ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
}

const std::string kHello("FLBS\x01", 5);

// ---- every store ----

// Two handles on one store (b may be a; for TCP b is another client), and what they need.
struct Stores {
  std::vector<std::shared_ptr<void>> keep;  // destroyed last
  std::shared_ptr<Store> a, b;
};
struct Kind {
  const char* name;
  std::function<Stores()> make;
};

Stores make_hash() {
  auto s = std::make_shared<HashStore>();
  return {{}, s, s};
}
Stores make_file() {
  auto dir = std::make_shared<TempDir>();
  auto a = std::make_shared<FileStore>(dir->file("store"), 2);
  auto b = std::make_shared<FileStore>(dir->file("store"), 2);
  return {{dir}, a, b};
}
Stores make_tcp() {
  auto m = std::make_shared<TCPStore>(kHost, master_options());
  auto c = std::make_shared<TCPStore>(kHost, client_options(m->port()));
  return {{}, m, c};
}
Stores make_prefix_hash() {
  auto base = std::make_shared<HashStore>();
  return {{base}, std::make_shared<PrefixStore>("p", base), std::make_shared<PrefixStore>("p", base)};
}
Stores make_prefix_tcp() {
  Stores t = make_tcp();
  return {{t.a, t.b}, std::make_shared<PrefixStore>("p", t.a),
          std::make_shared<PrefixStore>("p", t.b)};
}

class AnyStore : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { s_ = GetParam().make(); }
  Store& a() { return *s_.a; }
  Store& b() { return *s_.b; }
  Stores s_;
};

TEST_P(AnyStore, SetGetOverwrite) {
  a().set("k", "v1");
  EXPECT_EQ(b().get_string("k"), "v1");
  b().set("k", "second");
  EXPECT_EQ(a().get_string("k"), "second");
  const Bytes binary{0, 1, 255, 0, 7};
  a().set("bin", binary);
  EXPECT_EQ(b().get("bin"), binary);
  a().set("empty", Bytes{});
  EXPECT_EQ(b().get("empty"), Bytes{});
  EXPECT_TRUE(b().check({"empty"}));
}

TEST_P(AnyStore, AddIsDecimalText) {
  EXPECT_EQ(a().add("n", 5), 5);  // absent counts as 0
  EXPECT_EQ(b().add("n", -7), -2);
  EXPECT_EQ(a().get_string("n"), "-2");
  b().set("n", "40");
  EXPECT_EQ(a().add("n", 2), 42);
  EXPECT_EQ(a().add("n", 0), 42);
  a().set("text", "abc");
  const std::string msg = error_of<DistStoreError>([&] { b().add("text", 1); });
  EXPECT_NE(msg.find("add] "), std::string::npos) << msg;
  EXPECT_EQ(msg.front(), '[') << msg;
  EXPECT_NE(msg.find("text"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an integer"), std::string::npos) << msg;
  EXPECT_EQ(a().get_string("text"), "abc");  // untouched
}

TEST_P(AnyStore, CompareSet) {
  // absent, expected empty: sets
  EXPECT_EQ(a().compare_set("c", {}, bytes("one")), bytes("one"));
  EXPECT_EQ(b().get_string("c"), "one");
  // present, matches: sets
  EXPECT_EQ(b().compare_set("c", bytes("one"), bytes("two")), bytes("two"));
  EXPECT_EQ(a().get_string("c"), "two");
  // present, does not match: returns the current value, unchanged
  EXPECT_EQ(a().compare_set("c", bytes("one"), bytes("three")), bytes("two"));
  EXPECT_EQ(b().get_string("c"), "two");
  // absent, expected not empty: nothing set, expected returned (c10d)
  EXPECT_EQ(a().compare_set("d", bytes("x"), bytes("y")), bytes("x"));
  EXPECT_FALSE(b().check({"d"}));
}

TEST_P(AnyStore, CheckDeleteNumKeys) {
  EXPECT_EQ(a().num_keys(), 0);
  EXPECT_TRUE(a().check({}));
  a().set("x", "1");
  b().set("y", "2");
  EXPECT_EQ(a().num_keys(), 2);
  EXPECT_TRUE(b().check({"x", "y"}));
  EXPECT_FALSE(b().check({"x", "zz"}));
  EXPECT_TRUE(b().delete_key("x"));
  EXPECT_FALSE(a().delete_key("x"));
  EXPECT_FALSE(a().check({"x"}));
  EXPECT_EQ(b().num_keys(), 1);
  a().set("x", "again");
  EXPECT_EQ(b().get_string("x"), "again");
  EXPECT_EQ(a().num_keys(), 2);
}

TEST_P(AnyStore, GetTimesOutNamingTheKey) {
  a().set_timeout(Millis(100));
  const auto start = Clock::now();
  const std::string msg = error_of<DistStoreError>([&] { a().get("missing"); });
  const auto took = ms_since(start);
  EXPECT_GE(took, 95);
  EXPECT_LT(took, 1000);
  EXPECT_EQ(msg.front(), '[') << msg;
  EXPECT_NE(msg.find("get] timed out after 100 ms waiting for key: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  a().set("after", "ok");  // the store still works
  EXPECT_EQ(a().get_string("after"), "ok");
}

TEST_P(AnyStore, WaitTimesOutNamingTheMissingKeys) {
  a().set("here", "1");
  const auto start = Clock::now();
  const std::string msg =
      error_of<DistStoreError>([&] { b().wait({"here", "x1", "y2"}, Millis(150)); });
  const auto took = ms_since(start);
  EXPECT_GE(took, 145);
  EXPECT_LT(took, 1000);
  EXPECT_NE(msg.find("wait] timed out after 150 ms waiting for keys: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("x1, "), std::string::npos) << msg;
  EXPECT_EQ(msg.substr(msg.size() - 2), "y2") << msg;
  EXPECT_EQ(msg.find("here"), std::string::npos) << msg;
  // wait() without a timeout uses the store's
  b().set_timeout(Millis(100));
  const std::string msg2 = error_of<DistStoreError>([&] { b().wait({"z"}); });
  EXPECT_NE(msg2.find("timed out after 100 ms"), std::string::npos) << msg2;
  b().wait({"here"}, Millis(100));  // present: returns at once
  b().wait({}, Millis(100));
}

TEST_P(AnyStore, WaitAndGetReturnPromptlyWhenSet) {
  std::vector<int64_t> latencies_us;
  for (int i = 0; i < 5; ++i) {
    const std::string key = "late" + std::to_string(i);
    std::atomic<int64_t> set_at{0};
    std::thread setter([&] {
      std::this_thread::sleep_for(Millis(10));
      set_at = Clock::now().time_since_epoch().count();
      a().set(key, "v");
    });
    if (i % 2 == 0) {
      b().wait({key}, Millis(1500));
    } else {
      b().set_timeout(Millis(1500));
      EXPECT_EQ(b().get_string(key), "v");
    }
    const int64_t now = Clock::now().time_since_epoch().count();
    setter.join();
    ASSERT_NE(set_at.load(), 0);
    latencies_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                               Clock::duration(now - set_at.load()))
                               .count());
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  if (getenv("FLB_SHOW_LATENCY")) for (auto l : latencies_us) printf("%lld us\n", (long long)l);
  // c10d's stores answer within a few ms; the bound leaves room for a loaded machine.
  EXPECT_LT(latencies_us[2], 20'000) << "median wake-up latency (us)";
  EXPECT_LT(latencies_us.back(), 200'000);
}

TEST_P(AnyStore, ConcurrentAddFromThreads) {
  constexpr int kThreads = 4, kAdds = 100;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      Store& s = t % 2 ? b() : a();
      for (int i = 0; i < kAdds; ++i) s.add("total", 1);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(a().add("total", 0), kThreads * kAdds);
}

INSTANTIATE_TEST_SUITE_P(Stores, AnyStore,
                         ::testing::Values(Kind{"Hash", make_hash}, Kind{"File", make_file},
                                           Kind{"TCP", make_tcp},
                                           Kind{"PrefixOnHash", make_prefix_hash},
                                           Kind{"PrefixOnTCP", make_prefix_tcp}),
                         [](const auto& p) { return std::string(p.param.name); });

// ---- TCPStore ----

TEST(TCPStore, MasterAndThreeClientsWithConcurrentAdds) {
  constexpr int kWorld = 4;
  TCPStoreOptions mo = master_options();
  mo.port = free_port();
  mo.world_size = kWorld;  // the constructor waits for the three clients
  std::vector<std::unique_ptr<TCPStore>> stores(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] {
      if (r == 0) {
        stores[0] = std::make_unique<TCPStore>(kHost, mo);
      } else {
        TCPStoreOptions co = client_options(mo.port);
        co.world_size = kWorld;
        stores[r] = std::make_unique<TCPStore>(kHost, co);
      }
      stores[r]->set("rank/" + std::to_string(r), std::to_string(r * 10));
      stores[r]->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, Millis(1500));
    });
  for (auto& t : ts) t.join();
  ts.clear();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(stores[r]);
    EXPECT_EQ(stores[r]->port(), mo.port);
    for (int q = 0; q < kWorld; ++q)
      EXPECT_EQ(stores[r]->get_string("rank/" + std::to_string(q)), std::to_string(q * 10));
  }
  // two threads per store object, all adding to one counter
  constexpr int kAdds = 150;
  for (int t = 0; t < 2 * kWorld; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) stores[t % kWorld]->add("counter", 1);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(stores[3]->get_string("counter"), std::to_string(2 * kWorld * kAdds));
  EXPECT_EQ(stores[1]->num_keys(), kWorld + 1);
  // one compare_set winner among the clients
  std::atomic<int> winners{0};
  ts.clear();
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] {
      const Bytes mine = bytes("r" + std::to_string(r));
      if (stores[r]->compare_set("leader", {}, mine) == mine) ++winners;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST(TCPStore, WaitForWorkersTimesOut) {
  TCPStoreOptions mo = master_options(Millis(200));
  mo.world_size = 3;
  const auto start = Clock::now();
  const std::string msg = error_of<DistStoreError>([&] { TCPStore m(kHost, mo); });
  EXPECT_GE(ms_since(start), 195);
  EXPECT_LT(ms_since(start), 1500);
  EXPECT_EQ(msg, "[TCPStore] timed out after 200 ms waiting for 3 workers to connect "
                 "(1 connected)");
  // without wait_for_workers the master does not wait
  mo.wait_for_workers = false;
  TCPStore m(kHost, mo);
  m.set("k", "v");
  EXPECT_EQ(m.get_string("k"), "v");
}

TEST(TCPStore, PortInUse) {
  TCPStore first(kHost, master_options());
  ASSERT_GT(first.port(), 0);
  TCPStoreOptions o = master_options();
  o.port = first.port();
  const std::string msg = error_of<DistNetworkError>([&] { TCPStore second(kHost, o); });
  EXPECT_EQ(msg, "[TCPStore] port " + std::to_string(first.port()) + " on 127.0.0.1 is in use");
  first.set("still", "fine");
  EXPECT_EQ(first.get_string("still"), "fine");
}

TEST(TCPStore, ConnectToNobodyTimesOut) {
  const int port = free_port();
  const auto start = Clock::now();
  const std::string msg = error_of<DistNetworkError>(
      [&] { TCPStore c(kHost, client_options(port, Millis(200))); });
  EXPECT_GE(ms_since(start), 195);
  EXPECT_LT(ms_since(start), 1500);
  EXPECT_EQ(msg.rfind("[TCPStore] could not connect to 127.0.0.1:" + std::to_string(port) +
                          " within 200 ms",
                      0),
            0u)
      << msg;
}

TEST(TCPStore, ClientWaitsForALateMaster) {
  const int port = free_port();
  std::unique_ptr<TCPStore> client;
  std::thread t([&] { client = std::make_unique<TCPStore>(kHost, client_options(port)); });
  std::this_thread::sleep_for(Millis(60));
  TCPStoreOptions mo = master_options();
  mo.port = port;
  TCPStore master(kHost, mo);
  t.join();
  ASSERT_TRUE(client);
  client->set("k", "v");
  EXPECT_EQ(master.get_string("k"), "v");
}

TEST(TCPStore, MasterDestroyedWhileAClientWaits) {
  auto master = std::make_unique<TCPStore>(kHost, master_options(Millis(5000)));
  TCPStore client(kHost, client_options(master->port(), Millis(5000)));
  TCPStore idle(kHost, client_options(master->port(), Millis(5000)));
  std::string msg;
  int64_t took = -1;
  std::thread waiter([&] {
    const auto start = Clock::now();
    msg = error_of<DistError>([&] { client.wait({"never"}, Millis(5000)); });
    took = ms_since(start);
  });
  std::this_thread::sleep_for(Millis(50));
  master.reset();
  waiter.join();
  EXPECT_LT(took, 1000);
  EXPECT_EQ(msg.rfind("[TCPStore.wait] lost the connection to 127.0.0.1:", 0), 0u) << msg;
  // later calls fail at once
  const auto start = Clock::now();
  const std::string later = error_of<DistNetworkError>([&] { client.set("k", "v"); });
  EXPECT_LT(ms_since(start), 100);
  EXPECT_NE(later.find("[TCPStore.set] "), std::string::npos) << later;
  // a client that was idle finds out on its next call (no SIGPIPE, no hang)
  const std::string idle_msg = error_of<DistNetworkError>([&] { idle.set("k", Bytes(1 << 20)); });
  EXPECT_EQ(idle_msg.rfind("[TCPStore.set] lost the connection to 127.0.0.1:", 0), 0u) << idle_msg;
  EXPECT_LT(ms_since(start), 1000);
}

TEST(TCPStore, SurvivesClientsLeavingAtAnyTime) {
  TCPStore master(kHost, master_options());
  const int port = master.port();
  // connects and leaves at once; leaves in the middle of the hello
  int fd = raw_connect(port);
  ASSERT_GE(fd, 0);
  ::close(fd);
  fd = raw_connect(port);
  send_bytes(fd, kHello.substr(0, 3));
  ::close(fd);
  // leaves in the middle of a request
  fd = raw_connect(port);
  send_bytes(fd, kHello + std::string("\x01\x02\x00\x00\x00\x05\x00", 7));
  ::close(fd);
  // leaves while its wait is parked on the server; the key then arrives
  fd = raw_connect(port);
  std::string wait_req("\x05\x02\x00\x00\x00", 5);
  wait_req += std::string("\x08\x00\x00\x00", 4) + std::string("\xe8\x03\0\0\0\0\0\0", 8);
  wait_req += std::string("\x05\x00\x00\x00", 4) + "later";
  send_bytes(fd, kHello + wait_req);
  std::this_thread::sleep_for(Millis(20));
  ::close(fd);
  std::this_thread::sleep_for(Millis(20));
  master.set("later", "x");
  // a client destroyed right after a call
  for (int i = 0; i < 3; ++i) TCPStore(kHost, client_options(port)).add("leavers", 1);
  EXPECT_EQ(master.get_string("later"), "x");
  EXPECT_EQ(master.add("leavers", 0), 3);
  TCPStore c(kHost, client_options(port));
  EXPECT_EQ(c.get_string("later"), "x");
}

TEST(TCPStore, DropsPeersThatSpeakGarbage) {
  TCPStore master(kHost, master_options());
  const int port = master.port();
  const std::vector<std::string> garbage{
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      kHello + std::string("\x7f\x00\x00\x00\x00", 5),              // unknown op
      kHello + std::string("\x01\xff\xff\xff\xff", 5),              // absurd field count
      kHello + std::string("\x01\x01\x00\x00\x00\xff\xff\xff\xff", 9),  // oversize field
      kHello + std::string("\x08\x01\x00\x00\x00\x00\x00\x00\x00", 9),  // num_keys with a field
  };
  for (const auto& g : garbage) {
    const int fd = raw_connect(port);
    ASSERT_GE(fd, 0);
    send_bytes(fd, g);
    EXPECT_TRUE(closed_by_peer(fd, 1000)) << "not dropped: " << ::testing::PrintToString(g);
    ::close(fd);
  }
  master.set("k", "v");
  TCPStore c(kHost, client_options(port));
  EXPECT_EQ(c.get_string("k"), "v");
}

TEST(TCPStore, LargeValuesAndAllInterfaces) {
  TCPStore master("0.0.0.0", master_options());
  TCPStore client(kHost, client_options(master.port()));
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  client.set("big", big);
  EXPECT_EQ(master.get("big"), big);
  EXPECT_EQ(master.host(), "0.0.0.0");
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(TCPStore, NoDescriptorLeftBehind) {
  const int before = open_fds();
  {
    TCPStore master(kHost, master_options());
    TCPStore c1(kHost, client_options(master.port()));
    auto c2 = std::make_unique<TCPStore>(kHost, client_options(master.port()));
    c1.set("k", "v");
    EXPECT_EQ(c2->get_string("k"), "v");
    EXPECT_THROW(c1.wait({"none"}, Millis(20)), DistStoreError);
    c2.reset();
    EXPECT_THROW(TCPStore(kHost, client_options(free_port(), Millis(30))), DistNetworkError);
    TCPStoreOptions o = master_options();
    o.port = master.port();
    EXPECT_THROW(TCPStore(kHost, o), DistNetworkError);
  }
  {
    TempDir dir;
    FileStore f(dir.file("s"), 1);
    f.set("k", "v");
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(TCPStore, BadOptions) {
  EXPECT_THROW(TCPStore(kHost, client_options(0)), flambeau::ValueError);
  EXPECT_THROW(TCPStore(kHost, client_options(70000)), flambeau::ValueError);
}

// ---- FileStore ----

TEST(FileStore, RemovedByTheLastOfWorldSizeUsers) {
  TempDir dir;
  const std::string path = dir.file("s");
  auto a = std::make_unique<FileStore>(path, 2);
  auto b = std::make_unique<FileStore>(path, 2);
  EXPECT_EQ(a->path(), path);
  a->set("k", "v");
  a.reset();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(b->get_string("k"), "v");
  b.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  // world_size -1: kept
  { FileStore c(dir.file("kept")); c.set("k", "v"); }
  EXPECT_TRUE(std::filesystem::exists(dir.file("kept")));
  FileStore again(dir.file("kept"));
  EXPECT_EQ(again.get_string("k"), "v");
}

TEST(FileStore, RejectsAFileThatIsNotOne) {
  TempDir dir;
  const std::string path = dir.file("junk");
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a store at all\n", f);
    std::fclose(f);
  }
  const std::string msg = error_of<DistStoreError>([&] { FileStore s(path); });
  EXPECT_NE(msg.find("[FileStore] " + path + " is not a FileStore file"), std::string::npos)
      << msg;
  EXPECT_THROW(FileStore(dir.file("no/such/dir")), DistStoreError);
  EXPECT_THROW(FileStore(dir.file("x"), 0), flambeau::ValueError);
}

TEST(FileStore, SharedWithAForkedProcess) {
  TempDir dir;
  const std::string path = dir.file("shared");
  FileStore parent(path, 2);
  parent.set_timeout(Millis(1500));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(5);  // a watchdog: never outlive the test
    int code = 0;
    try {
      FileStore child(path, 2);
      child.set_timeout(Millis(1500));
      child.set("child", "hello");
      child.add("count", 10);
      if (child.get_string("parent") != "hi") code = 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  std::string got;
  EXPECT_NO_THROW(got = parent.get_string("child"));
  EXPECT_EQ(got, "hello");
  parent.add("count", 1);
  parent.set("parent", "hi");
  int status = 0;
  pid_t done = 0;
  const auto start = Clock::now();
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && ms_since(start) < 3000)
    std::this_thread::sleep_for(Millis(5));
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the child did not finish";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  parent.wait({"count"}, Millis(100));
  EXPECT_EQ(parent.add("count", 0), 11);
  EXPECT_EQ(parent.num_keys(), 3);  // child, count, parent
}

// ---- PrefixStore ----

TEST(PrefixStore, NamespacesAreIsolated) {
  auto base = std::make_shared<HashStore>();
  PrefixStore p1("a", base), p2("b", base);
  p1.set("k", "1");
  p2.set("k", "2");
  EXPECT_EQ(p1.get_string("k"), "1");
  EXPECT_EQ(p2.get_string("k"), "2");
  EXPECT_EQ(base->get_string("a/k"), "1");
  EXPECT_EQ(base->get_string("b/k"), "2");
  EXPECT_TRUE(p1.delete_key("k"));
  EXPECT_FALSE(p1.check({"k"}));
  EXPECT_TRUE(p2.check({"k"}));
  EXPECT_EQ(p2.add("n", 3), 3);
  EXPECT_FALSE(p1.check({"n"}));
  EXPECT_EQ(p2.num_keys(), base->num_keys());  // base's keys, as c10d
  // nested
  auto outer = std::make_shared<PrefixStore>("a", base);
  PrefixStore inner("b", outer);
  inner.set("k", "deep");
  EXPECT_EQ(base->get_string("a/b/k"), "deep");
  EXPECT_EQ(inner.base(), outer);
}

TEST(PrefixStore, TimeoutIsTheBases) {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(Millis(120));
  PrefixStore p("pre", base);
  EXPECT_EQ(p.timeout(), Millis(120));
  const std::string msg = error_of<DistStoreError>([&] { p.wait({"x"}); });
  EXPECT_EQ(msg, "[HashStore.wait] timed out after 120 ms waiting for key: pre/x");
  EXPECT_THROW(PrefixStore("q", nullptr), flambeau::ValueError);
}

// ---- HashStore ----

TEST(HashStore, ManyWaitersWakeTogether) {
  HashStore s;
  std::atomic<int> woke{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      s.wait({"go", "also"}, Millis(1500));
      ++woke;
    });
  std::this_thread::sleep_for(Millis(20));
  s.set("go", "1");
  std::this_thread::sleep_for(Millis(10));
  EXPECT_EQ(woke.load(), 0);  // "also" is still missing
  s.set("also", "1");
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke.load(), 4);
}

}  // namespace
