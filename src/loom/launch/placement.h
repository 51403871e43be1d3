#pragma once
// Which rank sits on which host: every rank names its host (comm::host_name: LOOM_HOST or
// gethostname), and rank 0 says how the mesh (config::RankOrder: which ranks form a dp group
// and a pipeline) lies on the hosts: which pipeline stages each holds, and whether the dp
// groups stay inside one.
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/config/config.h"

namespace loom::launch {

// Every rank's host name, by world rank (a collective over `world`).
std::vector<std::string> gather_hosts(comm::Backend& world);

// "placement on 2 hosts: h0 ranks 0-1 (pp stage 0), h1 ranks 2-3 (pp stage 1); every dp group
// inside one host"; empty for one host.
std::string placement_line(const std::vector<std::string>& host_of_rank, int dp, int pp, int tp,
                           config::RankOrder order = config::RankOrder::DpInside);

}  // namespace loom::launch
