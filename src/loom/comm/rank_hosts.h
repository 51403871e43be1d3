#pragma once
// Which host each world rank is on, once the ranks have told one another (loom train, on more
// than one host: launch/placement.h), so that a communication failure names the hosts involved
// ("recv from 0 (world rank 2 on node-b)"): across machines, a peer that stops answering is
// most often a host or a link that went away.
#include <string>
#include <vector>

namespace loom::comm {

// By world rank; an empty list, or one host for every rank, names none.
void set_rank_hosts(std::vector<std::string> host_of_rank);
// Ranks on more than one host are known (cheap: no lock).
bool rank_hosts_known();
// "" when not known (or every rank on one host).
std::string host_of_rank(int world_rank);
// The hosts of `world_ranks`, as "0-1 on node-a, 2-3 on node-b"; "" when not known.
std::string hosts_of(const std::vector<int>& world_ranks);

}  // namespace loom::comm
