// mpi_collbench: collbench's command line, sizes, checks and output over Open MPI's
// collectives, to compare procgroup with MPI on the same machine:
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bin/mpi_collbench allreduce
//          -b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1 -z 1 [--reference] [--json F]
//
// -z 1 times the blocking MPI functions, -z 0 the nonblocking ones, all issued then waited
// for (mpi_engine.h), as collbench's -z does.
#include <cstdio>
#include <exception>

#include "mpi_engine.h"
#include "options.h"
#include "runner.h"

int main(int argc, char** argv) {
  namespace bench = procgroup::bench;
  constexpr const char* kDescription =
      "mpi_collbench: time one MPI collective over a range of sizes, with collbench's options "
      "and output. Launch under mpirun.";
  const bench::ParsedOptions parsed =
      bench::parse_options(argc, argv, {"mpi_collbench", kDescription, false});
  if (!parsed.run) return parsed.exit_code;
  try {
    bench::MpiSession session(&argc, &argv);
    int status = 1;
    try {
      bench::MpiCommunicator comm;
      bench::MpiEngine engine;
      bench::RunInfo info{"mpi_collbench", "mpi",         bench::MpiSession::library_version(), "",
                          comm.size(),     parsed.options};
      status = bench::run_benchmark(info, comm, engine, nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mpi_collbench: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a collective
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_collbench: %s\n", e.what());
    return 1;
  }
}
