#pragma once
// The MPI implementation of Group (core/parallel/group.hpp), compiled only in a build with MPI
// (VLA_HAVE_MPI); nothing else in the toolkit includes <mpi.h>.
#include "core/parallel/group.hpp"

namespace vla::parallel {

// MPI_Init_thread (MPI_THREAD_FUNNELED: only the thread that called it talks to MPI) on MPI_COMM_WORLD,
// local ranks from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); MPI_Finalize when destroyed.
std::unique_ptr<Group> make_mpi_group(int& argc, char**& argv);

}  // namespace vla::parallel
