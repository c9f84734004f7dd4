# seqpar-train with ALST's memory features (--checkpoint full --offload-checkpoints --tiled-mlp
# --tiled-loss): the plan in the JSON carries them, the memory parts (checkpoints included) add up
# to the peak, host_offload_bytes holds every layer input, the table prints the parts, and
# --validate against the plain unsharded step passes.
set(features --checkpoint full --offload-checkpoints --tiled-mlp --tiled-loss)
execute_process(COMMAND ${PROGRAM} --comm virtual --method hybrid --sp 4 --ulysses-degree 2 --ring-degree 2
                        --steps 2 --warmup 1 ${features} -J ${OUT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "seqpar-train ${features} failed (${rc}): ${out} ${err}")
endif()
if(NOT out MATCHES "# memory at peak: [0-9.]+ MiB = parameters .* checkpoints .*host_offload")
  message(FATAL_ERROR "no memory table: ${out}")
endif()
file(READ ${OUT} doc)
function(expect_eq path expected)
  string(JSON got GET "${doc}" ${path})
  if(NOT got STREQUAL expected)
    message(FATAL_ERROR "${path}: expected '${expected}', got '${got}'")
  endif()
endfunction()
expect_eq("plan;checkpoint" "full")
expect_eq("plan;offload_checkpoints" "ON")
expect_eq("plan;tiled_mlp" "ON")
expect_eq("plan;tiled_loss" "ON")
expect_eq("plan;zero" "0")
string(JSON peak GET "${doc}" peak_memory_bytes)
set(sum 0)
foreach(part parameters gradients optimizer_states activations checkpoints attention_buffers logits working)
  string(JSON v GET "${doc}" memory ${part}_bytes)
  math(EXPR sum "${sum} + ${v}")
endforeach()
if(NOT sum EQUAL peak)
  message(FATAL_ERROR "memory parts add up to ${sum}, peak_memory_bytes is ${peak}")
endif()
# The default model: 2 layers, hidden 64; 64 tokens / sp 4 = 16 per rank; the default precision,
# bf16, stores the layer inputs in bf16: 2 x 16 x 64 x 2.
expect_eq("memory;host_offload_bytes" "4096")

execute_process(COMMAND ${PROGRAM} --comm virtual --method hybrid --sp 4 --ulysses-degree 2 --ring-degree 2
                        --steps 2 --validate ${features}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "validate: PASS")
  message(FATAL_ERROR "seqpar-train --validate ${features} failed (${rc}): ${out} ${err}")
endif()
