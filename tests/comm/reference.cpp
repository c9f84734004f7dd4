#include "reference.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "seqpar/core/error.hpp"
#ifdef SEQPAR_HAVE_CUDA
#include <cuda_runtime.h>

#include "seqpar/core/cuda_check.hpp"
#endif

#include "seqpar/comm/element.hpp"

namespace seqpar::comm::test {

Data make_inputs(int ranks, std::size_t elements, DType dt, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  const bool unsigned_type = dt == DType::u8;
  std::uniform_int_distribution<int> dist(unsigned_type ? 0 : -15, 15);
  Data d(static_cast<std::size_t>(ranks), std::vector<double>(elements));
  for (auto& rank : d)
    for (auto& v : rank) v = dist(gen);
  return d;
}

Data ref_all_to_all(const Data& in, std::size_t count) {
  const std::size_t P = in.size();
  Data out(P, std::vector<double>(P * count));
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t j = 0; j < count; ++j) out[r][p * count + j] = in[p][r * count + j];
  return out;
}

Data ref_all_gather(const Data& in, std::size_t count) {
  const std::size_t P = in.size();
  Data out(P, std::vector<double>(P * count));
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t j = 0; j < count; ++j) out[r][p * count + j] = in[p][j];
  return out;
}

namespace {
// u8 sums wrap modulo 256 like the hardware; the other types stay in their exact range.
double wrap(double v, DType dt) {
  if (dt != DType::u8) return v;
  auto m = static_cast<long long>(v) % 256;
  return static_cast<double>(m < 0 ? m + 256 : m);
}
}  // namespace

Data ref_reduce_scatter(const Data& in, std::size_t count, DType dt) {
  const std::size_t P = in.size();
  Data out(P, std::vector<double>(count, 0.0));
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t j = 0; j < count; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < P; ++p) s += in[p][r * count + j];
      out[r][j] = wrap(s, dt);
    }
  return out;
}

Data ref_all_reduce(const Data& in, DType dt) {
  const std::size_t P = in.size();
  Data out(P, std::vector<double>(in[0].size(), 0.0));
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t i = 0; i < in[0].size(); ++i) {
      double s = 0;
      for (std::size_t p = 0; p < P; ++p) s += in[p][i];
      out[r][i] = wrap(s, dt);
    }
  return out;
}

Data ref_ring_shift(const Data& in, int shift) {
  const int P = static_cast<int>(in.size());
  Data out(in.size());
  for (int r = 0; r < P; ++r) out[r] = in[((r - shift) % P + P) % P];
  return out;
}

std::vector<unsigned char> encode(const std::vector<double>& v, DType dt) {
  std::vector<unsigned char> b(v.size() * dtype_size(dt));
  for (std::size_t i = 0; i < v.size(); ++i) store(b.data(), i, dt, v[i]);
  return b;
}

std::vector<double> decode(const std::vector<unsigned char>& b, DType dt) {
  std::vector<double> v(b.size() / dtype_size(dt));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = load(b.data(), i, dt);
  return v;
}

namespace {

// Inputs of the members of a group, generated for the whole world so every group sees the
// same data for the same world rank.
Data member_inputs(const std::vector<int>& world_ranks, int world_size, std::size_t elements,
                   DType dt, std::uint64_t seed) {
  Data all = make_inputs(world_size, elements, dt, seed);
  Data d;
  for (int w : world_ranks) d.push_back(all[w]);
  return d;
}

std::vector<unsigned char> poisoned(std::size_t elements, DType dt) {
  return std::vector<unsigned char>(elements * dtype_size(dt), 0xA5);
}

}  // namespace

CommBuffer::CommBuffer(const Communicator& c, std::vector<unsigned char> init)
    : device_(c.device_memory()), host_(std::move(init)) {
  if (!device_) return;
#ifdef SEQPAR_HAVE_CUDA
  SEQPAR_CUDA_CHECK(cudaMalloc(&dev_, std::max<std::size_t>(host_.size(), 1)));
  SEQPAR_CUDA_CHECK(cudaMemcpy(dev_, host_.data(), host_.size(), cudaMemcpyHostToDevice));
#else
  throw Error("device buffers need a CUDA build");
#endif
}

CommBuffer::~CommBuffer() {
#ifdef SEQPAR_HAVE_CUDA
  if (dev_) cudaFree(dev_);
#endif
}

void* CommBuffer::data() { return device_ ? dev_ : host_.data(); }

std::vector<double> CommBuffer::read(Communicator& c, DType dt) {
  c.synchronize();
#ifdef SEQPAR_HAVE_CUDA
  if (device_)
    SEQPAR_CUDA_CHECK(cudaMemcpy(host_.data(), dev_, host_.size(), cudaMemcpyDeviceToHost));
#endif
  return decode(host_, dt);
}

void expect_collectives_match(Communicator& c, const std::vector<int>& world_ranks,
                              int world_size, DType dt, std::size_t count) {
  const int P = c.size(), r = c.rank();
  ASSERT_EQ(static_cast<int>(world_ranks.size()), P);
  const std::size_t n = static_cast<std::size_t>(P) * count;
  const std::string what = fmt::format("{} rank {}/{} {} count {}", to_string(c.backend()), r, P,
                                       to_string(dt), count);

  Data full = member_inputs(world_ranks, world_size, n, dt, 11);
  CommBuffer send(c, encode(full[r], dt));
  {
    CommBuffer recv(c, poisoned(n, dt));
    c.all_to_all(send.data(), recv.data(), count, dt);
    EXPECT_EQ(recv.read(c, dt), ref_all_to_all(full, count)[r]) << "all_to_all " << what;
  }
  {
    CommBuffer recv(c, poisoned(count, dt));
    c.reduce_scatter(send.data(), recv.data(), count, dt);
    EXPECT_EQ(recv.read(c, dt), ref_reduce_scatter(full, count, dt)[r])
        << "reduce_scatter " << what;
  }
  {
    CommBuffer recv(c, poisoned(n, dt));
    c.all_reduce(send.data(), recv.data(), n, dt);
    EXPECT_EQ(recv.read(c, dt), ref_all_reduce(full, dt)[r]) << "all_reduce " << what;
  }
  {
    CommBuffer inplace(c, encode(full[r], dt));
    c.all_reduce(inplace.data(), inplace.data(), n, dt);
    EXPECT_EQ(inplace.read(c, dt), ref_all_reduce(full, dt)[r]) << "in-place all_reduce " << what;
  }
  {
    Data part = member_inputs(world_ranks, world_size, count, dt, 12);
    CommBuffer send_part(c, encode(part[r], dt));
    CommBuffer recv(c, poisoned(n, dt));
    c.all_gather(send_part.data(), recv.data(), count, dt);
    EXPECT_EQ(recv.read(c, dt), ref_all_gather(part, count)[r]) << "all_gather " << what;
  }
  c.barrier();
}

void expect_ring_rotation_matches(Communicator& c, DType dt, std::size_t count) {
  const int P = c.size(), r = c.rank();
  Data k = make_inputs(P, count, dt, 21), v = make_inputs(P, count, dt, 22);
  // Double buffers: send from one while receiving into the other, then swap.
  CommBuffer kbuf[2] = {CommBuffer(c, encode(k[r], dt)), CommBuffer(c, poisoned(count, dt))};
  CommBuffer vbuf[2] = {CommBuffer(c, encode(v[r], dt)), CommBuffer(c, poisoned(count, dt))};
  const int next = (r + 1) % P, prev = (r - 1 + P) % P;
  for (int step = 1; step < P; ++step) {
    const int cur = (step - 1) % 2, nxt = step % 2;
    Request rk = c.send_recv_async(kbuf[cur].data(), next, kbuf[nxt].data(), prev, count, dt);
    Request rv = c.send_recv_async(vbuf[cur].data(), next, vbuf[nxt].data(), prev, count, dt);
    c.wait(rk);
    c.wait(rv);
    EXPECT_FALSE(rk.pending());
    EXPECT_EQ(kbuf[nxt].read(c, dt), ref_ring_shift(k, step)[r]) << "K after step " << step;
    EXPECT_EQ(vbuf[nxt].read(c, dt), ref_ring_shift(v, step)[r]) << "V after step " << step;
    c.barrier();  // nobody overwrites a buffer a slower peer still sends from
  }
}

void expect_groups_match(Communicator& world, int ulysses, int ring, DType dt) {
  Groups g = make_groups(world, ulysses, ring);
  const int w = world.rank(), W = world.size();
  const RankLayout& l = g.layout;
  EXPECT_EQ(l.sp, ulysses * ring);
  EXPECT_EQ(l.dp, W / l.sp);
  struct Case {
    Communicator* comm;
    std::vector<int> members;
    int index;
    const char* name;
  };
  const Case cases[] = {{g.sp.get(), l.sp_group(w), l.sp_index(w), "sp"},
                        {g.ulysses.get(), l.ulysses_group(w), l.ulysses_index(w), "ulysses"},
                        {g.ring.get(), l.ring_group(w), l.ring_index(w), "ring"},
                        {g.dp.get(), l.dp_group(w), l.dp_index(w), "dp"}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    ASSERT_NE(cs.comm, nullptr);
    EXPECT_EQ(cs.comm->size(), static_cast<int>(cs.members.size()));
    EXPECT_EQ(cs.comm->rank(), cs.index);
    EXPECT_EQ(cs.members[cs.index], w);
    expect_collectives_match(*cs.comm, cs.members, W, dt, 3);
  }
}

}  // namespace seqpar::comm::test
