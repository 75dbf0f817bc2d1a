// See Note [Gloo waits a failed connection does not wake] in gloo_pair_failure.h.
#include "flambeau/distributed/gloo/gloo_pair_failure.h"

#if FLB_GLOO_PAIR_ACCESS
#include <gloo/common/error.h>
#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>
#endif

namespace flambeau::distributed::gloo_pairs {

#if FLB_GLOO_PAIR_ACCESS
namespace {
namespace tcp = gloo::transport::tcp;

// Pointers to protected members, formed in a derived class (what C++ allows).
struct PairAccess : tcp::Pair {
  static std::mutex& mutex(tcp::Pair& p) { return p.*(&PairAccess::m_); }
  static std::exception_ptr& error(tcp::Pair& p) { return p.*(&PairAccess::ex_); }
  static std::deque<tcp::Op>& sending(tcp::Pair& p) { return p.*(&PairAccess::tx_); }
  static tcp::Op& receiving(tcp::Pair& p) { return p.*(&PairAccess::rx_); }
  static void fail(tcp::Pair& p, const std::string& why) {
    (p.*(&PairAccess::signalExceptionExternal))(why);
  }
};
struct BufferAccess : tcp::UnboundBuffer {
  static void fail(tcp::UnboundBuffer& b, std::exception_ptr e) {
    (b.*(&BufferAccess::signalException))(e);
  }
};

tcp::Pair* pair_of(gloo::Context& context, int r) {
  if (r == context.rank) return nullptr;
  return dynamic_cast<tcp::Pair*>(context.getPair(r).get());
}

// Wakes the two waits Gloo leaves out: the send being written, the receive arriving.
void wake_transfers(tcp::Pair& p, std::exception_ptr e) {
  for (auto& op : PairAccess::sending(p))
    if (gloo::NonOwningPtr<tcp::UnboundBuffer> b(op.ubuf); b) BufferAccess::fail(*b, e);
  if (gloo::NonOwningPtr<tcp::UnboundBuffer> b(PairAccess::receiving(p).ubuf); b)
    BufferAccess::fail(*b, e);
}
}  // namespace

bool supported() { return true; }

int failed_peer(gloo::Context& context) {
  for (int r = 0; r < context.size; ++r)
    if (tcp::Pair* p = pair_of(context, r)) {
      std::lock_guard lock(PairAccess::mutex(*p));
      if (PairAccess::error(*p)) return r;
    }
  return -1;
}

void fail_context(gloo::Context& context, const std::string& why) {
  for (int r = 0; r < context.size; ++r)
    if (tcp::Pair* p = pair_of(context, r)) {
      PairAccess::fail(*p, why);  // no-op where the pair failed already
      std::lock_guard lock(PairAccess::mutex(*p));
      wake_transfers(*p, PairAccess::error(*p));
    }
}
#else
bool supported() { return false; }
int failed_peer(gloo::Context&) { return -1; }
void fail_context(gloo::Context&, const std::string&) {}
#endif

}  // namespace flambeau::distributed::gloo_pairs
