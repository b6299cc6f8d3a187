"""``python -m zlink_trio.samples.chatrooms``: run the sample and its self-check;
``... chatrooms node NAME --store URL --secret-file F``: run one node as a process."""

import sys

from zlink_trio.samples.chatrooms import node_main, runner

if sys.argv[1:2] == ["node"]:
    node_main.main(sys.argv[2:])
else:
    runner.main()
