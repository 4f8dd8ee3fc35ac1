#include "procgroup/ddp/bucket_assignment.h"

#include <algorithm>
#include <numeric>

namespace procgroup::ddp {

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.rbegin(), order.rend(), size_t{0});
  return order;
}

std::vector<BucketSpec> assign_buckets(std::span<const Parameter> params,
                                       std::span<const size_t> order, const BucketLimits& limits) {
  // One open bucket per (dtype, device); few keys, so a flat vector is enough.
  struct Open {
    pg_dtype_t dtype;
    Device device;
    BucketSpec bucket;
    bool first = true;  // still filling this key's first (small) bucket
  };
  std::vector<Open> open;
  std::vector<BucketSpec> closed;
  std::vector<size_t> position(params.size());
  for (size_t k = 0; k < order.size(); ++k) position.at(order[k]) = k;

  for (size_t index : order) {
    const Parameter& p = params[index];
    auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) {
      return o.dtype == p.dtype && o.device == p.device;
    });
    if (it == open.end()) {
      open.push_back({p.dtype, p.device, {p.dtype, p.device, {}, 0, 0}, true});
      it = open.end() - 1;
    }
    const size_t limit = it->first ? limits.first_bucket_bytes : limits.bucket_cap_bytes;
    if (!it->bucket.params.empty() && it->bucket.bytes + p.bytes() > limit) {
      closed.push_back(std::move(it->bucket));
      it->bucket = {p.dtype, p.device, {}, 0, 0};
      it->first = false;
    }
    it->bucket.params.push_back(index);
    it->bucket.numel += p.numel;
    it->bucket.bytes += p.bytes();
  }
  for (Open& o : open) closed.push_back(std::move(o.bucket));

  std::stable_sort(closed.begin(), closed.end(), [&](const BucketSpec& a, const BucketSpec& b) {
    return position[a.params.front()] < position[b.params.front()];
  });
  return closed;
}

}  // namespace procgroup::ddp
