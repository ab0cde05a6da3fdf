#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (GGUF, Q4_1, Apache-2.0) into the llama-server cache and print
# its path: `scripts/fetch-model.sh smollm2`, under the name the tests and scripts know.
# Environment and exit status as fetch-model.sh's.
exec bash "$(dirname "${BASH_SOURCE[0]}")/fetch-model.sh" smollm2
