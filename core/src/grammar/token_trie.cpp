#include <algorithm>
#include <numeric>

#include "ferrox/grammar/matcher.h"

namespace ferrox::grammar {

TokenTrie::TokenTrie(std::vector<std::string> pieces, std::vector<bool> end_of_generation)
    : pieces_(std::move(pieces)), eog_(std::move(end_of_generation)) {
    eog_.resize(pieces_.size(), false);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < pieces_.size(); ++i) {
        if (eog_[i])
            eog_ids_.push_back(static_cast<int32_t>(i));
        else if (!pieces_[i].empty())
            ids.push_back(static_cast<int32_t>(i));
    }
    // Sorted by bytes, the tokens under one prefix are a run, the shortest first.
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        const auto& pa = pieces_[static_cast<size_t>(a)];
        const auto& pb = pieces_[static_cast<size_t>(b)];
        const int order = pa.compare(pb);  // one pass over the bytes, not two
        return order != 0 ? order < 0 : a < b;
    });
    nodes_.emplace_back();
    // Breadth-first over (node, run of ids, depth), so that each node's
    // children are made together and lie contiguous.
    struct Job {
        uint32_t node;
        size_t lo, hi, depth;
    };
    std::vector<Job> queue{{0, 0, ids.size(), 0}};
    for (size_t q = 0; q < queue.size(); ++q) {
        const Job job = queue[q];
        max_depth_ = std::max(max_depth_, job.depth);
        size_t i = job.lo;
        nodes_[job.node].first_token = static_cast<uint32_t>(token_ids_.size());
        while (i < job.hi && pieces_[static_cast<size_t>(ids[i])].size() == job.depth)
            token_ids_.push_back(ids[i++]);
        nodes_[job.node].n_tokens =
            static_cast<uint32_t>(token_ids_.size()) - nodes_[job.node].first_token;
        nodes_[job.node].first_child = static_cast<uint32_t>(nodes_.size());
        while (i < job.hi) {
            const auto byte = static_cast<uint8_t>(pieces_[static_cast<size_t>(ids[i])][job.depth]);
            size_t j = i;
            while (j < job.hi &&
                   static_cast<uint8_t>(pieces_[static_cast<size_t>(ids[j])][job.depth]) == byte)
                ++j;
            Node child;
            child.byte = byte;
            nodes_.push_back(child);
            queue.push_back({static_cast<uint32_t>(nodes_.size() - 1), i, j, job.depth + 1});
            ++nodes_[job.node].n_children;
            i = j;
        }
    }
}

}  // namespace ferrox::grammar
