#!/usr/bin/env python3
"""Side by side: `toolhost mcp serve` and the reference MCP server
(`@modelcontextprotocol/server-everything`, Node, no sandbox, no journal),
driven by the same minimal stdio client.

The client writes newline-delimited JSON-RPC to the server's stdin and
reads its stdout: `initialize`, `notifications/initialized`, WARMUP calls,
then CALLS timed sequential `tools/call` (toolhost's `dice_roll`, the
reference's `get-sum`). ROUNDS rounds, the servers interleaved in each,
each round a fresh process. Prints each server's median and p99 per call
(over all rounds' calls), its calls/s, the median of the per-round medians,
and the ratio toolhost / reference, as a Markdown table.

toolhost runs twice in every round: under PROFILE (dice only) and under a
profile allowing every builtin (made from `toolhost tools list --json`, so
it follows the builtins a build ships); the same `dice_roll` call under both,
so the ratio all-builtins / 1-tool says whether a call's cost grows with the
profile's size (issue 38: it must stay within 5 %).

Standard library only: it measures the servers, not a client SDK.

    python3 bench/mcp_side_by_side.py --toolhost target/release/toolhost \\
        --everything tests/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js \\
        --runs-dir target/tmp/side-by-side [--runs-dir /dev/shm/side-by-side] \\
        [--rounds 5] [--calls 2000]
"""

import argparse
import array
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WARMUP = 50

# ext4's FS_IOC_GETFLAGS / FS_IOC_SETFLAGS and FS_TOPDIR_FL (linux/fs.h),
# as encoded on 64-bit Linux (elsewhere the ioctl fails and is skipped).
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_TOPDIR_FL = 0x00020000


def fresh_place(base):
    """A fresh directory under `base` for one server's runs, whether ext4
    took the placement hint, and what one file creation costs there (median
    µs; the probe's files stay until the directory is removed at the end:
    this bench runs last in `make bench`, so its own deletions slow no
    other bench down).

    On an ext4 without a journal (this VM's root) a new inode's search
    skips, one buffer-cache lookup each, every inode of its block group
    freed in the last 60-360 s; after the test suite or another bench
    deleted thousands of files beside the build a creation there took
    0.6-0.9 ms instead of 16 µs. `FS_TOPDIR_FL` on the parent makes ext4
    place the new directory like a top-level one, in an emptier group (the
    same as bench/fresh_disk.rs does for the Rust benches)."""
    os.makedirs(base, exist_ok=True)
    hinted = True
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            # An int, not a long: the kernel reads and writes 4 bytes
            # although the request's encoding says 8.
            flags = array.array("i", [0])
            fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
            flags[0] |= FS_TOPDIR_FL
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
        finally:
            os.close(fd)
    except OSError:
        hinted = False  # not ext4 (tmpfs): nothing to place
    place = tempfile.mkdtemp(prefix="runs-", dir=base)
    probe = os.path.join(place, "create-probe")
    os.mkdir(probe)
    times = []
    for index in range(200):
        started = time.perf_counter_ns()
        os.close(os.open(os.path.join(probe, f"file-{index:03}"),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        times.append((time.perf_counter_ns() - started) / 1000)
    return place, hinted, statistics.median(times)


def all_builtins_profile(toolhost, path):
    """Write a profile allowing every builtin `toolhost` lists (but
    `task.return`, which the runtime adds to return-mode children, with the
    delegation flags the agent tools need) to `path`; the number of tools."""
    listed = subprocess.run(toolhost + ["tools", "list", "--json"], check=True,
                            capture_output=True, text=True).stdout
    tools = [item["id"] for item in json.loads(listed)
             if item["source"]["kind"] == "builtin" and item["id"] != "builtin:task.return"]
    profile = {
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "side-by-side-all-builtins",
        "description": "bench/mcp_side_by_side.py: every builtin, to compare a call's cost "
                       "with the 1-tool profile's.",
        "tools": {"allow": tools, "maxCallsPerRun": 1000000},
        "delegation": {"canDelegate": True, "canHandoff": True},
    }
    with open(path, "w") as file:
        json.dump(profile, file)
    return len(tools)


def percentile(sorted_values, p):
    rank = round((len(sorted_values) - 1) * p)
    return sorted_values[min(rank, len(sorted_values) - 1)]


class Server:
    """One server process speaking MCP over its stdin/stdout pipes."""

    def __init__(self, command, cwd=None):
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
        )
        self.next_id = 0

    def request(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the server closed its stdout")
            answer = json.loads(line)
            # Skip notifications and log messages the server sends meanwhile.
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def notify(self, method):
        message = {"jsonrpc": "2.0", "method": method}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure(command, tool, arguments, calls, cwd=None):
    """Per-call latencies in microseconds, for `calls` timed calls."""
    server = Server(command, cwd)
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "side-by-side", "version": "1"},
            },
        )
        server.notify("notifications/initialized")
        names = [t["name"] for t in server.request("tools/list")["tools"]]
        if tool not in names:
            raise RuntimeError(f"{tool} is not offered: {names}")
        params = {"name": tool, "arguments": arguments}
        for _ in range(WARMUP):
            result = server.request("tools/call", params)
        if result.get("isError"):
            raise RuntimeError(f"{tool}: {result}")
        latencies = []
        for _ in range(calls):
            started = time.perf_counter_ns()
            server.request("tools/call", params)
            latencies.append((time.perf_counter_ns() - started) / 1000)
        return latencies
    finally:
        server.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolhost", required=True)
    parser.add_argument("--everything", required=True, help="server-everything's dist/index.js")
    parser.add_argument("--profile", default=os.path.join(os.path.dirname(__file__), "side-by-side-profile.json"))
    parser.add_argument("--runs-dir", required=True, action="append",
                        help="where toolhost's runs are written; repeat it to measure several "
                             "places (a disk, a tmpfs) in the same interleaved rounds")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    node = shutil.which("node")
    if node is None or not os.path.exists(args.everything):
        print("SKIPPED: node or server-everything (`make setup`) is not installed",
              file=sys.stderr)
        return 0
    places = []
    probes = []
    for runs_dir in args.runs_dir:
        try:
            place, hinted, create_us = fresh_place(runs_dir)
            places.append((runs_dir, place))
            placement = ("placed with ext4's top-level hint" if hinted
                         else "the file system took no placement hint")
            probes.append(f"runs in {runs_dir} ({placement}): one file creation took "
                          f"{create_us:.0f} µs before the rounds.")
        except OSError as error:
            # A tmpfs this machine does not have: measure the others.
            print(f"note: {runs_dir} left out: {error}", file=sys.stderr)
    if not places:
        print("no --runs-dir could be used", file=sys.stderr)
        return 1
    toolhost = [args.toolhost]
    if args.cache_dir:
        toolhost += ["--cache-dir", args.cache_dir]
    toolhost += ["--mcp-dir", "none", "--ext-dir", "none"]
    wide_profile = os.path.join(places[0][1], "all-builtins-profile.json")
    wide_count = all_builtins_profile(toolhost, wide_profile)
    profiles = [("1-tool profile", args.profile),
                (f"all-builtins profile ({wide_count} tools)", wide_profile)]
    servers = []
    # (runs dir, 1-tool label, all-builtins label): the pairs compared.
    pairs = []
    for runs_dir, runs in places:
        labels = []
        for name, profile in profiles:
            label = f"`toolhost mcp serve`, `dice_roll`, {name}, runs in {runs_dir}"
            # Each profile's runs in a directory of their own.
            runs_of = os.path.join(runs, "all" if labels else "one")
            os.makedirs(runs_of, exist_ok=True)
            servers.append((label, toolhost + ["mcp", "serve", "--profile", profile,
                                               "--runs-dir", runs_of],
                            "dice_roll", {"formula": "2d6"}))
            labels.append(label)
        pairs.append((runs_dir, *labels))
    reference = ("server-everything (Node), `get-sum`", [node, args.everything, "stdio"],
                 "get-sum", {"a": 2, "b": 3})
    servers.append(reference)
    samples = {label: [] for label, *_ in servers}
    round_medians = {label: [] for label, *_ in servers}
    try:
        for round_index in range(args.rounds):
            # Every other round the other way round: no server always
            # follows the same one.
            ordered = servers if round_index % 2 == 0 else servers[::-1]
            for label, command, tool, arguments in ordered:
                latencies = measure(command, tool, arguments, args.calls)
                samples[label].extend(latencies)
                round_medians[label].append(statistics.median(latencies))
                print(f"  round {round_index}: {label}: median "
                      f"{statistics.median(latencies):.0f} µs", file=sys.stderr)
    finally:
        for _, runs in places:
            shutil.rmtree(runs, ignore_errors=True)

    print(f"{args.rounds} interleaved rounds × {args.calls} sequential calls "
          f"after {WARMUP} warm-up calls.")
    print()
    print("| server | median per call | p99 | calls/s | per-round medians |")
    print("|---|---|---|---|---|")
    medians = {}
    for label, *_ in servers:
        values = sorted(samples[label])
        median = statistics.median(values)
        medians[label] = median
        rounds = " / ".join(f"{m:.0f}" for m in round_medians[label])
        print(f"| {label} | {median:.0f} µs | {percentile(values, 0.99):.0f} µs | "
              f"{1e6 / median:.0f} | {rounds} |")
    print()
    for runs_dir, one, wide in pairs:
        for name, label in (("1-tool", one), ("all-builtins", wide)):
            print(f"ratio toolhost ({name}) / reference (median per call), runs in {runs_dir}: "
                  f"{medians[label] / medians[reference[0]]:.2f}×")
        print(f"ratio all-builtins / 1-tool profile (median per call), runs in {runs_dir}: "
              f"{medians[wide] / medians[one]:.3f}")
    print()
    for line in probes:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
