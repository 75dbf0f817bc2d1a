// Note [Gloo waits a failed connection does not wake]: when a TCP pair of Gloo's fails (the
// peer died, or closed its side after its own failure), Gloo wakes the waits it has queued
// on that pair but not two others: a send whose bytes are being written and a receive whose
// bytes are arriving. Those sit until the op's timeout, and so do waits on healthy pairs
// whose peer is itself stuck. fail_context() wakes them all: while an op runs, the backend
// polls failed_peer() and, on the first failed pair, fails every pair of the context with
// the same error, so the op raises at once and the peers see their connections close.
// Gloo's pairs keep this state protected; these functions reach it (read under the pair's
// own mutex, in the order Gloo locks). Where the Gloo at hand lays its pairs out otherwise
// (FLB_GLOO_PAIR_ACCESS is 0), they do nothing and a failure shows at the op's timeout.
#pragma once
#include <gloo/context.h>

#include <string>

namespace flambeau::distributed::gloo_pairs {

// Rank of a peer whose pair has failed, or -1.
int failed_peer(gloo::Context& context);
// Fails every pair of the context with `why` and wakes every wait on it.
void fail_context(gloo::Context& context, const std::string& why);
// Whether the two above can see Gloo's pairs (else they do nothing).
bool supported();

}  // namespace flambeau::distributed::gloo_pairs
