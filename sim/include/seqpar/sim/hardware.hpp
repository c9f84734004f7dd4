// Hardware as the cost models see it: one GPU type, and one system (node type) built of it.
// Rates are achievable figures (peak x efficiency) where the preset gives an efficiency.
#pragma once
#include <optional>
#include <string>
#include <vector>

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

struct Gpu {
  std::string name;
  // The attention kernel family the attention figures describe (attention_kernels.hpp); empty when
  // the preset names none.
  std::string attention_kernel;
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
};

enum class LinkKind { nvswitch, nvlink, pcie };

struct Link {
  LinkKind kind = LinkKind::nvswitch;
  double bytes_per_s = 0;     // achievable, one direction, per GPU (nominal x efficiency)
  double latency_s = 0;
  // PCIe only: GPUs behind one CPU socket, and the socket-to-socket rate all crossing flows share.
  int gpus_per_socket = 0;
  double cross_socket_bytes_per_s = 0;
};

// What a training framework adds beyond the kernels the cost models time, fitted by `seqpar
// calibrate` from measured steps (sim/framework_terms.hpp has the JSON and the functions the cost
// models call). The defaults change no prediction: dividing by 1 and adding 0 are exact.
struct FrameworkTerms {
  double memory_bound_efficiency = 1;  // elementwise and optimizer work: achieved / HBM bandwidth
  double step_overhead_s = 0;          // fixed per step (launches, Python, synchronisation)
  double reserve_bytes = 0;            // memory kept beyond the modelled parts (allocator, context)
  double bytes_per_token = 0;          // ... and per local token (fp32 logits, caches)
  // Bytes the loss phase holds per logit (per token and vocab entry): a framework choice, not
  // structure. 8 is PyTorch's cross entropy on bf16 logits: the bf16 logits (2), their fp32 upcast
  // for the softmax (4) and the bf16 gradient (2), as Megatron-LM and HF Transformers run it.
  // seqpar-train keeps the bf16 logits and writes their gradient in place: 2.
  double loss_bytes_per_logit = 8;
  // Bytes per parameter of the gradients (sharded by ZeRO-2/3): a framework choice too. 2: bf16
  // gradients, as the ZeRO paper counts mixed precision (2 + 2 + 12) and DeepSpeed's ZeRO-2/3
  // reduce and partition them in the model's dtype. 4: fp32, as Megatron-LM keeps them in bf16
  // training (arguments.py turns accumulate_allreduce_grads_in_fp32 on for --bf16, "bfloat16
  // requires gradient accumulation and all-reduce to be done in fp32"; its distributed-optimizer
  // guide counts "bf16 param, fp32 grads" as 18 bytes per parameter) and seqpar-train does.
  double gradient_bytes_per_param = 2;
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
};
// Memory terms are never negative: what a framework holds beyond the modelled parts. The upper
// bounds keep every product finite; an efficiency is a fraction of the bandwidth, as the GPU's;
// at most a few copies of an fp32 logit (0 for a fused loss that never materialises them);
// gradients from fp8 to fp64.
inline constexpr FrameworkTermSpec kFrameworkTerms[] = {
    {"step_overhead_s", &FrameworkTerms::step_overhead_s, FrameworkTarget::step_time, 0, 1e4, false},
    {"memory_bound_efficiency", &FrameworkTerms::memory_bound_efficiency, FrameworkTarget::step_time, 1e-3, 1, true},
    {"reserve_bytes", &FrameworkTerms::reserve_bytes, FrameworkTarget::peak_memory, 0, 1e15, false},
    {"bytes_per_token", &FrameworkTerms::bytes_per_token, FrameworkTarget::peak_memory, 0, 1e9, false},
    {"loss_bytes_per_logit", &FrameworkTerms::loss_bytes_per_logit, FrameworkTarget::choice, 0, 64, false},
    {"gradient_bytes_per_param", &FrameworkTerms::gradient_bytes_per_param, FrameworkTarget::choice, 1, 8, false},
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
  FrameworkTerms framework;           // from a calibrated profile's "framework"; defaults: none
};

}  // namespace seqpar::sim
