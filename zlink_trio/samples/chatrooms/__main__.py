"""``python -m zlink_trio.samples.chatrooms``: run the sample and its self-check."""

from zlink_trio.samples.chatrooms.runner import main

main()
