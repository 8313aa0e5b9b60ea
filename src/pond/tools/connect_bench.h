// `pond bench smallbank|kvs|tatp --connect ADDR`: a workload driven from this process through
// the client API against a cluster that serves it (`pond serve --workload W`, docs/clients.md).
// --clients threads, each with its own connection to one of the CNs the server names (spread
// over them in turn), call the workload's procedures by name for --seconds, each keeping
// --pipeline calls in flight (each slot of a pipeline draws its calls as a client of its own); the
// report has the embedded run's lines that a client can see — throughput, the committed mix, aborts
// by reason, latency — and the workload's check, done through reads (SmallBank's money check).
// Called from the CLI's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "pond/bench/workload.h"
#include "pond/tools/client_security.h"

namespace pond::tools {

struct ConnectFlags {
  std::string address;  // empty: an embedded run
  int clients = 4;
  // Calls each client keeps in flight on one pipeline (client::Pipeline); 1: one unary call at a
  // time, waiting for each answer.
  int pipeline = 16;
  ClientSecurityFlags security;  // TLS from a certs directory, or --insecure
};

// Registers --connect, --clients, --pipeline and the client security flags on a bench command; `f`
// must outlive the parse.
void AddConnectFlags(CLI::App* cmd, ConnectFlags* f);
// With --connect, the flags that shape an embedded cluster or its data must not be given (the
// server's cluster and tables decide them): InvalidArgument naming the first one given.
Status CheckConnectFlags(const CLI::App& cmd, const ConnectFlags& f);

// Runs `w` against f.address for `seconds`, client i's draws seeded from (seed, i), and reports
// it; `json_path`: also write the result there. The exit code: 0 the run and its check passed,
// 1 they did not (or the server could not be reached), 2 bad input (the server does not serve
// this workload).
// `history_path`: where a recording driver's history goes (list-append's; the history is judged
// under the isolation the server names either way).
int RunConnected(const std::string& what, const bench::Workload& w, const ConnectFlags& f,
                 double seconds, uint64_t seed, const std::string& json_path,
                 const std::string& history_path = "");

}  // namespace pond::tools
