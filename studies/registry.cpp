// The studies, one line each, in the order the report shows them. Each factory is defined in
// studies/<id>/study.cpp; docs/studies.md says how to add one.
#include "studies/study.hpp"

namespace vla::studies {

#define VLA_STUDIES(X)                                                    \
  X(fig2a_latency)              /* fig2a-latency */                       \
  X(fig3_throughput)            /* fig3-throughput */                     \
  X(fig4_state_norms)           /* fig4-state-norms (with fig2b) */       \
  X(table2_jacobian)            /* table2-jacobian */                     \
  X(fig5_mqar_capacity)         /* fig5-mqar-capacity */                  \
  X(table9_per_seed)            /* table9-per-seed */                     \
  X(table8_vla_training_logs)   /* table8-vla-training-logs */            \
  X(fig6_mqar_long_context)     /* fig6-mqar-long-context */              \
  X(fig7_copy)                  /* fig7-copy (with table7) */             \
  X(table11_capacity_curve)     /* table11-capacity-curve */              \
  X(table10_capacity_boundary)  /* table10-capacity-boundary */           \
  X(fig8_overload)              /* fig8-overload */                       \
  X(table12_steps_effect)       /* table12-steps-effect */                \
  X(fig9_ood)                   /* fig9-ood (with table13) */             \
  X(table4_ablation)            /* table4-ablation */                     \
  X(recipe_sensitivity)         /* recipe-sensitivity */                  \
  X(recipe_capacity)            /* recipe-capacity (after recipe-sensitivity) */ \
  X(penalty_selectivity)        /* penalty-selectivity */

#define VLA_DECLARE_STUDY(f) Study f();
VLA_STUDIES(VLA_DECLARE_STUDY)

const std::vector<Study>& study_registry() {
#define VLA_MAKE_STUDY(f) f(),
  static const std::vector<Study> reg{VLA_STUDIES(VLA_MAKE_STUDY)};
  return reg;
}

}  // namespace vla::studies
