// Hardware as the cost models see it: one GPU type, and one system (node type) built of it.
// Rates are achievable figures (peak x efficiency) where the preset gives an efficiency.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/sim/framework.hpp"

namespace seqpar::sim {

// Efficiency of a kernel family against its token dimension L (GEMM rows, attention key length):
// efficiency * L^p / (L^p + half_tokens^p), a Hill curve. p = 1 is the classic L / (L + L_half);
// measured cuBLAS GEMMs rise far more steeply than that (p about 3 on H100), so calibrated
// profiles fit p as well.
struct EfficiencyCurve {
  double efficiency = 0;   // fraction of peak approached at large L, in (0, 1]
  double half_tokens = 0;  // L at which half of it is reached
  double exponent = 1;     // steepness p
};

// A calibrated attention curve for one kind of kernel call. Attention rates differ by direction,
// head dimension and mask, so a calibrated profile holds one curve per measured kind.
struct AttentionCurve {
  bool backward = false;
  int head_dim = 0;                 // 0: the measurements did not say
  std::optional<bool> causal;       // empty: the measurements did not say
  EfficiencyCurve curve;
};

// How the attention kernel's rate falls with the length of the documents a varlen call holds
// (preset field "varlen_attention", of the GPU's default kernel or of one of its attention_kernels):
// the rate measured at each document length, all at one total of tokens per call, so that the
// call's own size (attention_half_tokens' curve) is the same at every point and only the documents'
// length changes. document_cost.hpp turns it into a relative cost per kernel tile. No lengths: no
// measurement, and `source` says what is assumed instead.
struct VarlenAttention {
  std::vector<std::int64_t> lengths;  // document length of each measurement, rising
  std::vector<double> flops_per_s;    // the rate measured at each length (its FLOPs as `causal` says)
  bool causal = false;                // the measurement's mask (a causal one counts half the FLOPs)
  std::string source;
  bool measured() const { return !lengths.empty(); }
};

struct Gpu {
  std::string name;
  // The attention kernel family the attention figures describe (attention_kernels.hpp); empty when
  // the preset names none.
  std::string attention_kernel;
  // The CUDA compute capability ("9.0"), on which frameworks choose their attention kernel
  // (framework.hpp: AttentionChoice); empty when the preset does not give it.
  std::string compute_capability;
  double memory_bytes = 0;
  double bf16_flops = 0;              // dense peak, FLOP/s
  double hbm_bytes_per_s = 0;
  double pcie_bytes_per_s = 0;        // one direction, GPU <-> host
  double gemm_efficiency = 0;         // fraction of peak on large GEMMs
  double gemm_half_tokens = 0;        // token rows at which GEMM efficiency is half its peak
  double gemm_exponent = 1;           // steepness of the GEMM curve (EfficiencyCurve::exponent)
  double attention_fwd_efficiency = 0;
  double attention_bwd_efficiency = 0;
  double attention_half_tokens = 0;   // key/query block length at which attention efficiency halves
  // Calibrated curves per kernel kind (seqpar calibrate); when one matches a call's direction it
  // replaces the three scalar attention figures above (compute_cost.hpp: select_attention_curve).
  std::vector<AttentionCurve> attention_curves;
  double kernel_overhead_s = 0;
  double reserved_bytes = 0;          // context, workspaces, fragmentation
  // Whether the attention kernel's backward writes dK and dV per query head under grouped-query
  // attention and sums them over each group afterwards (FlashAttention-2's mha_bwd: dk_expanded,
  // dv_expanded), rather than per KV head: its memory model (memory_cost.hpp). Optional figure
  // "attention_bwd_expands_kv_grads" (1 or 0) of the GPU or of one of its attention_kernels.
  bool attention_bwd_expands_kv_grads = false;
  // The attention kernel's backward workspace per query row and local head, in fp32 values:
  // per_head_dim x head_dim + per_row (memory_cost.hpp). Optional figures of the GPU or of one of
  // its attention_kernels; default 1 and 1: an fp32 dQ accumulator and a row sum (seqpar's kernel,
  // FlashAttention-2's dq_accum and softmax_d).
  double attention_bwd_workspace_per_head_dim = 1;
  double attention_bwd_workspace_per_row = 1;
  // The forward's workspace for a block without a causal diagonal starting at position 0 (a ring
  // step's unmasked block, a non-causal model), fp32 values per query row and local head, per
  // head_dim: 0 for seqpar's kernel and FlashAttention-2, whose forward needs none.
  double attention_fwd_workspace_per_head_dim = 0;
  // A kernel that materialises the score matrix (standard attention: a batched GEMM into the
  // scores, softmax, a second batched GEMM) moves every score through HBM several times, so its
  // time follows the scores (batch x heads x s^2), not the FLOPs (x head_dim): its two attention
  // efficiencies hold at this head dimension and scale with head_dim / it. 0: a fused (flash)
  // kernel, whose efficiencies hold at any head dimension.
  double attention_score_bound_head_dim = 0;
  VarlenAttention varlen;  // the attention kernel's rate against document length
  // FP8 (core/precision.hpp; sim/fp8_cost.hpp). fp8_flops: the dense FP8 tensor-core peak, 0 where
  // the GPU has none (a plan with an FP8 part is then refused). The FP8 GEMM curve is the bf16
  // one's shape with its own efficiency (of fp8_flops) and half point. The FP8 attention
  // efficiencies (of fp8_flops) belong to the attention kernel, as the bf16 ones do: 0 where the
  // kernel has no FP8 path in that direction (FlashAttention-3's FP8 is forward only), and that
  // direction runs at the bf16 rate.
  double fp8_flops = 0;
  // The rate of an FP8 GEMM with cuBLASLt's split accumulator (no FAST_ACCUM): what Transformer
  // Engine's dgrad and wgrad GEMMs and torchao's backward run, and what seqpar-bench-gemm's FP8 rows
  // measure and calibrate fits. The forward's fast-accumulation GEMM is charged at it too (no
  // published Hopper figure for it at stated settings), a slight overcharge on Hopper; Blackwell
  // has no separate fast mode.
  double fp8_gemm_efficiency = 0;
  double fp8_gemm_half_tokens = 0;
  double fp8_gemm_exponent = 1;  // the FP8 curve's steepness (a calibrated profile's; else the bf16 curve's)
  double fp8_attention_fwd_efficiency = 0;
  double fp8_attention_bwd_efficiency = 0;
  double fp4_flops = 0;  // dense FP4 peak (Blackwell): shown, not yet a plan part
  // The compute capability's major version (9 for "9.0"), 0 when the preset does not give it: MXFP8
  // needs Blackwell's (10 and up) block-scaled tensor cores.
  int compute_major() const;
};

enum class LinkKind { nvswitch, nvlink, pcie };

struct Link {
  LinkKind kind = LinkKind::nvswitch;
  double bytes_per_s = 0;     // achievable, one direction, per GPU (nominal x efficiency)
  double latency_s = 0;       // a collective's start: what a small message pays once
  // PCIe only: GPUs behind one CPU socket, and the socket-to-socket rate all crossing flows share.
  int gpus_per_socket = 0;
  double cross_socket_bytes_per_s = 0;
  // What each step of a ring collective adds on this link: a ring all-gather or reduce-scatter
  // over n ranks on k nodes passes a chunk n - k times inside nodes and k - 1 times across them
  // before the first chunk has gone round (NCCL's tuning model, src/graph/tuning.cc).
  double ring_step_latency_s = 0;
  // Inside an NVLink-SHARP domain (Hopper and later NVSwitch nodes) NCCL may run an all-gather or
  // reduce-scatter with NVLS at a flat latency instead of the ring; 0 where the link has none.
  double nvls_latency_s = 0;
};

// Each framework term as the profile loader and `seqpar calibrate` see it: its JSON key, what it
// changes (a step's time or its peak memory; `choice`: a framework's choice, kept from the base
// system, never fitted), and its physical range, which the loader enforces and the fit stays in.
// A term that divides a time (an efficiency) is fitted as its reciprocal, in which the step time is
// linear. Calibrate fits the terms in this order: where the steps cannot tell two terms apart, the
// earlier one is fitted and the later one keeps its prior.
enum class FrameworkTarget { step_time, peak_memory, choice };
struct FrameworkTermSpec {
  const char* key;
  double FrameworkTerms::*field;
  FrameworkTarget target;
  double lo, hi;
  bool reciprocal;
  const char* meaning;  // what the term stands for, as `seqpar calibrate` prints it
};
// Memory terms are never negative: what a framework holds beyond the modelled parts. The upper
// bounds keep every product finite; an efficiency is a fraction of the bandwidth, as the GPU's.
// (What the loss and the gradients hold is the framework profile's inventory: framework.hpp.)
inline constexpr FrameworkTermSpec kFrameworkTerms[] = {
    {"step_overhead_s", &FrameworkTerms::step_overhead_s, FrameworkTarget::step_time, 0, 1e4, false,
     "seconds per step beyond the kernels (launches, Python, synchronisation)"},
    {"attention_step_efficiency", &FrameworkTerms::attention_step_efficiency, FrameworkTarget::step_time, 1e-3, 1,
     true, "share of the GPU figures' attention rate the attention kernels reach inside the framework's steps (the "
     "causal mask, sequence lengths beyond the figures' measurements, clocks under sustained load)"},
    {"memory_bound_efficiency", &FrameworkTerms::memory_bound_efficiency, FrameworkTarget::step_time, 1e-3, 1, true,
     "share of HBM bandwidth the elementwise, loss and optimizer work reaches"},
    {"gemm_step_efficiency", &FrameworkTerms::gemm_step_efficiency, FrameworkTarget::step_time, 1e-3, 1, true,
     "share of the GPU figures' GEMM rate the GEMMs reach inside the framework's steps (clocks under sustained "
     "load, gaps between dependent kernels, the epilogues and layouts the figures leave out)"},
    {"host_pin_s_per_gib", &FrameworkTerms::host_pin_s_per_gib, FrameworkTarget::step_time, 0, 100, false,
     "seconds a cold first step (measured without warm-up) spends pinning each GiB of the host buffers the "
     "framework keeps for offloaded checkpoints and states; no later step pays it"},
    {"reserve_bytes", &FrameworkTerms::reserve_bytes, FrameworkTarget::peak_memory, 0, 1e15, false,
     "bytes the allocator hands out beyond the profile's inventory (workspaces, caches)"},
    {"bytes_per_token", &FrameworkTerms::bytes_per_token, FrameworkTarget::peak_memory, 0, 1e9, false,
     "bytes per local token beyond the inventory"},
};

struct System {
  std::string name;
  Gpu gpu;
  int gpus_per_node = 0;
  Link intra;                  // inside a node
  Link inter;                  // across nodes: the per-GPU share of the node's NICs
  // The NICs themselves: which flows share which NIC decides a crossing flow's rate (comm_cost).
  // GPU i of a node uses NIC i x nics / gpus_per_node. 0: one NIC per GPU at inter's rate, so a
  // System built without them models as before. Presets give either inter_node.bandwidth_gbps
  // or nics_per_node and nic_gbps; inter.bytes_per_s is then nics x nic rate / gpus_per_node.
  int nics_per_node = 0;
  double nic_bytes_per_s = 0;  // achievable, one direction, per NIC
  double host_adam_params_per_s = 0;  // optimizer step on the host (offloaded optimizer), per node
  // Host (CPU) memory per node, for what the GPUs offload (checkpoints, optimizer states, weights);
  // 0: the preset does not give it, and host memory is not checked.
  double host_memory_bytes = 0;
  FrameworkTerms framework;           // from a calibrated profile's "framework"; defaults: none
  // The training framework's memory inventory and priors (framework.hpp): `--framework`, else the
  // one a calibrated profile names, else the default.
  Framework profile = default_framework();
  bool framework_calibrated = false;  // `framework` was fitted (a calibrated profile's "framework" object)
  // Why gpu.attention_kernel is the kernel the figures describe ("--attention-kernel", the
  // framework's choice on this GPU, the preset's default), as the commands print it.
  std::string attention_kernel_why;
  std::string framework_why;  // why `profile` is the framework (--framework, a calibrated profile's, the default)
};

}  // namespace seqpar::sim
