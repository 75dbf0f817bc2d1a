// See mpi_process.h.
#include "flambeau/distributed/mpi/mpi_process.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "flambeau/distributed/backend.h"
#include "flambeau/distributed/errors.h"

namespace flambeau::distributed::mpi_detail {

std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(rc);
  return std::string(buf, size_t(len));
}

namespace {

// User-defined reductions: inout[i] = op(inout[i], in[i]) through reduce_buffers.
template <DType D, RedOpType O>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_buffers(inout, inout, in, size_t(*len), D, O);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

template <DType D>
void create_user_ops(MpiProcess& p, bool sum_and_product) {
  auto make = [&](RedOpType op, MPI_User_function* fn) {
    int rc = MPI_Op_create(fn, /*commute=*/1, &p.user_ops[int(D)][int(op)]);
    if (rc != MPI_SUCCESS) throw DistError("[new_comm] MPI_Op_create failed: " + mpi_error_text(rc));
  };
  if (sum_and_product) {
    make(RedOpType::SUM, &user_reduce<D, RedOpType::SUM>);
    make(RedOpType::PRODUCT, &user_reduce<D, RedOpType::PRODUCT>);
  }
  make(RedOpType::MIN, &user_reduce<D, RedOpType::MIN>);
  make(RedOpType::MAX, &user_reduce<D, RedOpType::MAX>);
}

}  // namespace

MpiProcess& mpi_process() {
  // Thread-safe once (a function-local static); a failure throws and the next call retries.
  static MpiProcess* process = [] {
    auto* p = new MpiProcess;  // lives for the whole process (MPI_Finalize runs at exit)
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
      throw DistError("[new_comm] backend 'mpi': MPI was already finalized in this process");
    if (!initialized) {
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &p->provided);
      if (rc != MPI_SUCCESS)
        throw DistError("[new_comm] backend 'mpi': MPI_Init_thread failed: " + mpi_error_text(rc));
      p->we_initialized = true;
      std::atexit(finalize_at_exit);
      // Errors on MPI_COMM_WORLD (MPI_Comm_idup) come back as codes, not a process abort.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    } else {
      MPI_Query_thread(&p->provided);
    }
    p->serialize = p->provided < MPI_THREAD_MULTIPLE;
    if (MPI_Type_contiguous(2, MPI_BYTE, &p->two_bytes) != MPI_SUCCESS ||
        MPI_Type_commit(&p->two_bytes) != MPI_SUCCESS)
      throw DistError("[new_comm] backend 'mpi': could not create the 2-byte MPI datatype");
    create_user_ops<DType::BFloat16>(*p, true);
    create_user_ops<DType::Float16>(*p, true);
    create_user_ops<DType::Float32>(*p, false);
    create_user_ops<DType::Float64>(*p, false);
    return p;
  }();
  return *process;
}

// Note [MPI datatypes]: the element type of each dtype.
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float16:
    case DType::BFloat16: return mpi_process().two_bytes;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
  }
  throw TypeError("[mpi] invalid dtype");
}

MPI_Op mpi_op(DType dtype, RedOpType op) {
  MpiProcess& p = mpi_process();
  auto user = [&]() -> MPI_Op {
    MPI_Op o = int(op) < kUserOps ? p.user_ops[int(dtype)][int(op)] : MPI_OP_NULL;
    if (o == MPI_OP_NULL)
      throw TypeError(detail::str_cat("[mpi] ReduceOp.", red_op_name(op), " is not defined for ",
                                      dtype_name(dtype)));
    return o;
  };
  if (dtype == DType::Bool) {
    switch (op) {
      case RedOpType::SUM:
      case RedOpType::MAX:
      case RedOpType::BOR: return MPI_LOR;
      case RedOpType::PRODUCT:
      case RedOpType::MIN:
      case RedOpType::BAND: return MPI_LAND;
      case RedOpType::BXOR: return MPI_LXOR;
      case RedOpType::AVG:
      case RedOpType::PREMUL_SUM: break;
    }
    return user();  // throws
  }
  if (is_reduced_float(dtype)) return user();
  switch (op) {
    case RedOpType::SUM: return MPI_SUM;
    case RedOpType::PRODUCT: return MPI_PROD;
    case RedOpType::MIN: return is_floating(dtype) ? user() : MPI_MIN;
    case RedOpType::MAX: return is_floating(dtype) ? user() : MPI_MAX;
    case RedOpType::BAND:
    case RedOpType::BOR:
    case RedOpType::BXOR:
      if (!is_integral(dtype, false)) return user();  // throws
      return op == RedOpType::BAND ? MPI_BAND : op == RedOpType::BOR ? MPI_BOR : MPI_BXOR;
    case RedOpType::AVG:
    case RedOpType::PREMUL_SUM: break;
  }
  return user();  // throws
}

std::string library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, size_t(std::max(len, 0)));
  // "Open MPI v4.1.4, package: Debian OpenMPI, ident: ..." -> "Open MPI 4.1.4"
  s = s.substr(0, s.find_first_of(",\n"));
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  s = a == std::string::npos ? "" : s.substr(a, b - a + 1);
  if (size_t v = s.rfind(" v"); v != std::string::npos && v + 2 < s.size() &&
                                std::isdigit(static_cast<unsigned char>(s[v + 2])))
    s.erase(v + 1, 1);
  return s.empty() ? "MPI (unknown library)" : s;
}

}  // namespace flambeau::distributed::mpi_detail
