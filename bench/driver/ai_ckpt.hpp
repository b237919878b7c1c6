// cairn-bench ai-ckpt: AI-Ckpt's synthetic iterative application (
// docs/bench.md, "Zero-copy checkpoints (AI-Ckpt)").
#pragma once

namespace cairn::bench {

// argv[0] is "ai-ckpt". Exit codes as cairn-bench's (0, 1 failure, 2 usage).
int RunAiCkpt(int argc, char** argv);

}  // namespace cairn::bench
