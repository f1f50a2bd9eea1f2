// The studies, one line each, in the order the report shows them. Each factory is defined in
// studies/<id>/study.cpp; docs/studies.md says how to add one.
#include "studies/study.hpp"

namespace vla::studies {

#define VLA_STUDIES(X)                                          \
  X(table2_jacobian)            /* table2-jacobian */           \
  X(fig4_state_norms)           /* fig4-state-norms (+fig2b) */ \
  X(fig5_mqar_capacity)         /* fig5-mqar-capacity */

#define VLA_DECLARE_STUDY(f) Study f();
VLA_STUDIES(VLA_DECLARE_STUDY)

const std::vector<Study>& study_registry() {
#define VLA_MAKE_STUDY(f) f(),
  static const std::vector<Study> reg{VLA_STUDIES(VLA_MAKE_STUDY)};
  return reg;
}

}  // namespace vla::studies
