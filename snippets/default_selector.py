"""Which mechanism selectors.DefaultSelector picks here, and which ones this system offers.

The article gives a table (epoll on Linux, kqueue on macOS, select on Windows).
This prints what this machine actually has, so the claim is checked, not copied.
"""

import selectors
import sys

available = [name for name in ("EpollSelector", "KqueueSelector", "DevpollSelector", "PollSelector", "SelectSelector")
             if hasattr(selectors, name)]
chosen = selectors.DefaultSelector.__name__
print(f"platform: {sys.platform}; DefaultSelector is {chosen}; available: {', '.join(available)}")
if sys.platform.startswith("linux"):
    assert chosen == "EpollSelector"
