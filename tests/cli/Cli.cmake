# The `meshflow` command as a user runs it: exit codes and key output lines.
set(mf $<TARGET_FILE:meshflow>)
set(src ${CMAKE_SOURCE_DIR})

function(cli_test name)
  cmake_parse_arguments(T "WILL_FAIL" "EXPECT" "COMMAND" ${ARGN})
  add_test(NAME cli.${name} COMMAND ${T_COMMAND} WORKING_DIRECTORY ${src})
  if(T_EXPECT)
    set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_EXPECT}")
  endif()
  if(T_WILL_FAIL)
    set_tests_properties(cli.${name} PROPERTIES WILL_FAIL TRUE)
  endif()
endfunction()

cli_test(run_quickstart COMMAND ${mf} run examples/quickstart.mesh EXPECT "cluster: 32 x A100")
cli_test(run_error_exits_1 WILL_FAIL COMMAND ${mf} run tests/golden/units/add_bytes_to_seconds.mesh)
cli_test(check_clean COMMAND ${mf} check examples/quickstart.mesh)
cli_test(run_plan_example COMMAND ${mf} run examples/plan_gpt.mesh EXPECT "simulated step:")
cli_test(check_error_exits_1 WILL_FAIL COMMAND ${mf} check tests/golden/syntax/several_errors.mesh)
cli_test(no_command_is_usage WILL_FAIL COMMAND ${mf})
cli_test(dump_mlp COMMAND ${mf} dump tests/golden/models/trace_mlp.mesh --model "classifier(hidden = 32)" --batch 4
         EXPECT "parameters 420 in 4 tensors; 12 ops")
cli_test(dump_needs_model WILL_FAIL COMMAND ${mf} dump examples/quickstart.mesh)
cli_test(read_denied WILL_FAIL COMMAND ${mf} run examples/train_tiny_gpt.mesh)
foreach(command run check repl dump plan schedule solve-stages solve-sharding)
  cli_test(help_${command} COMMAND ${mf} ${command} --help EXPECT "usage: meshflow ${command}")
endforeach()

# An exact exit status, with the output (stdout and stderr) matched too.
function(cli_exit_test name code expect)
  add_test(NAME cli.${name} COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${ARGN}
           WORKING_DIRECTORY ${src})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}.*exit=${code}")
endfunction()

# `meshflow plan` (docs/cli.md) on the small GPT of tests/golden/planning/_cli.mesh.
set(plan_file tests/golden/planning/_cli.mesh)
set(plan_args --model tiny --cluster "cpu(devices = 4)" --batch 8)
cli_test(help_lists_plan COMMAND ${mf} --help EXPECT "plan +plan a model's parallel training")
cli_exit_test(plan_table 0 "plan: [0-9]+ stages? on [0-9]+ pipeline ranks?.*stage +layers +submesh"
              ${mf} plan ${plan_file} ${plan_args})
cli_exit_test(plan_json 0
              "^{\"cluster\":{.*\"format\":\"meshflow-plan\",\"model\":\"gpt\",\"plan\":{.*\"microbatches\":[0-9]+.*\"peak_memory_bytes\":[0-9.e+]+.*\"schedule\":\"[a-z0-9-]+\".*\"stages\":\\[\\{.*\"devices\":\\[0.*\"layers\":\\[0,[0-9]+\\].*\"logical_mesh\":\\[[0-9]+,[0-9]+\\].*\"submesh\":\\[[0-9]+,[0-9]+\\].*\"step_time_s\":[0-9.e+-]+.*\"tflops_per_device\":"
              ${mf} plan ${plan_file} ${plan_args} --json)
cli_exit_test(plan_schedule_and_set 0 "plan: 2 stages on 2 pipeline ranks, schedule 1f1b, 2 microbatches"
              ${mf} plan ${plan_file} ${plan_args} --schedule two_stages --set microbatches=2)
cli_exit_test(plan_set_words 0 "schedule gpipe, 4 microbatches"
              ${mf} plan ${plan_file} ${plan_args} --set pipeline=gpipe --set microbatches=4 --set stages=2)
cli_exit_test(plan_needs_batch 2 "missing --batch N"
              ${mf} plan ${plan_file} --model tiny --cluster "cpu(devices = 4)")
cli_exit_test(plan_needs_model 2 "missing --model EXPR" ${mf} plan ${plan_file} --batch 8)
cli_exit_test(plan_bad_set 2 "--set needs HINT=VALUE" ${mf} plan ${plan_file} ${plan_args} --set 8)
cli_exit_test(plan_memory_bound 1
              "error: cannot plan 'gpt': .*memory_per_device.*PlanningError.*<--set>:2:3: note: 'memory_per_device' is set here"
              ${mf} plan ${plan_file} ${plan_args} --set memory_per_device=100KB)
cli_exit_test(plan_hint_in_file 1 "_cli.mesh:[0-9]+:[0-9]+: note: 'memory_per_device' is set here"
              ${mf} plan ${plan_file} ${plan_args} --schedule tight)
cli_exit_test(plan_unknown_hint 1 "unknown schedule hint 'microbatch'.*InvalidDeclaration"
              ${mf} plan ${plan_file} ${plan_args} --set microbatch=2)
# A misspelt hint whose value is a word is an unknown hint too, not a syntax
# error in its value, and the nearest hint is named.
cli_exit_test(plan_unknown_word_hint 1
              "<--set>:2:3: error: unknown schedule hint 'pipline'; did you mean 'pipeline'\\?.*InvalidDeclaration"
              ${mf} plan ${plan_file} ${plan_args} --set pipline=1f1b)
cli_exit_test(plan_bad_model 1 "<--model>:1:1: error: unknown name 'no_such_model'"
              ${mf} plan ${plan_file} --model no_such_model --cluster "cpu(devices = 4)" --batch 8)
cli_exit_test(plan_not_a_schedule 1 "--schedule tiny is a model, not a schedule block"
              ${mf} plan ${plan_file} ${plan_args} --schedule tiny)
# p.save and p.save_trace write where `meshflow run` may: the current folder.
add_test(NAME cli.plan_save COMMAND ${mf} run ${src}/tests/golden/planning/_save.mesh
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.plan_save PROPERTIES PASS_REGULAR_EXPRESSION "true true\ntrue")
# load_plan reads back what p.save wrote: the same plan, simulated, exported and trained.
add_test(NAME cli.plan_load COMMAND ${mf} run ${src}/tests/golden/planning/_load.mesh
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.plan_load PROPERTIES PASS_REGULAR_EXPRESSION "true gpt true\ntrue true\ntrue\n.*1\n")
# train(..., trace = path) writes the last step's measured trace there too.
add_test(NAME cli.train_trace COMMAND ${mf} run ${src}/tests/golden/training/_trace.mesh
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.train_trace PROPERTIES PASS_REGULAR_EXPRESSION "true true true")

# A folder is not a script: a clear error and exit status 1, not an empty run.
cli_exit_test(run_folder 1 "cannot read 'examples': it is a folder, not a .mesh script"
              ${mf} run examples)
cli_exit_test(check_folder 1 "cannot read 'examples': it is a folder, not a .mesh script"
              ${mf} check examples)
cli_exit_test(run_missing_file 1 "cannot read 'no_such_script.mesh': no such file"
              ${mf} run no_such_script.mesh)
cli_test(version COMMAND ${mf} --version EXPECT "^meshflow [0-9]+\\.[0-9]+\\.[0-9]+\n$")
# Writing into a folder that does not exist says why it failed.
add_test(NAME cli.save_missing_folder
         COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${mf} run ${src}/tests/golden/planning/_save_missing_folder.mesh
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.save_missing_folder PROPERTIES PASS_REGULAR_EXPRESSION
  "cannot write '[^']*/no_such_folder/plan.json': the folder '[^']*/no_such_folder' does not exist \\[InvalidValue\\].*exit=1")
# A checkpoint folder that cannot be written is found before the first step.
add_test(NAME cli.checkpoint_checked_first
         COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${mf} run ${src}/tests/golden/training/_checkpoint_unwritable.mesh
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.checkpoint_checked_first PROPERTIES
  PASS_REGULAR_EXPRESSION "error: cannot write checkpoints to '[^']*/not_a_folder/ckpt': '[^']*/not_a_folder' is a file, not a folder \\[CheckpointError\\].*exit=1"
  FAIL_REGULAR_EXPRESSION "step +1")
# plan --json writes the plan file load_plan reads: planned on the command line,
# written, loaded by a script, it is the script's own plan and trains the same.
add_test(NAME cli.plan_json_loads
         COMMAND sh -c "\"$1\" plan \"$2/_cli.mesh\" --model tiny --cluster \"cpu(devices = 4)\" --batch 8 --json > cli_plan.json && \"$1\" run \"$2/_load_cli.mesh\""
                 sh ${mf} ${src}/tests/golden/planning
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli.plan_json_loads PROPERTIES PASS_REGULAR_EXPRESSION "true gpt true\ntrue true\n.*true 2\n")
# --json: standard output is one JSON line even when the script's imports print.
add_test(NAME cli.plan_json_alone
         COMMAND sh -c "\"$@\" 2>/dev/null" sh ${mf} plan tests/golden/planning/_cli_prints.mesh
                 --model tiny --cluster "cpu(devices = 4)" --batch 8 --json
         WORKING_DIRECTORY ${src})
set_tests_properties(cli.plan_json_alone PROPERTIES PASS_REGULAR_EXPRESSION "^{\"[^\n]*}\n$")
# The examples run as a user runs them (the training example is ./dev.sh example).
cli_test(run_plan_my_model COMMAND ${mf} run examples/plan_my_model.mesh
         EXPECT "the planner's choice is [0-9.]+ times faster")
cli_test(run_moe COMMAND ${mf} run examples/moe.mesh EXPECT "MoE step: [0-9.]+ ms")
cli_test(run_megatron_table COMMAND ${mf} run examples/megatron_table.mesh
         EXPECT "Megatron-LM: --tensor-model-parallel-size")

# The cuda backend on a machine without a GPU (as CI is): --backend cuda and
# train() on a cuda(...) cluster fail at once, naming CUDA, exit 1 — in a CUDA
# build ("no CUDA device is available") and in one without ("no CUDA backend").
cli_exit_test(cuda_backend_without_gpu 1 "meshflow: --backend cuda: [^\n]*CUDA" ${mf} run --backend cuda examples/quickstart.mesh)
cli_exit_test(cuda_cluster_without_gpu 1 "cannot train on cuda: [^\n]*CUDA" ${mf} run tests/cli/train_cuda.mesh)
# Time budgets (docs/cli.md, "Time budgets"): every command that plans or
# solves takes --time-budget; a planning past it is a TimeBudget error, a solver
# with an answer in hand returns it marked not proven.
cli_exit_test(run_time_budget 1
              "error: planning ran out of its time budget of 1e-09 s.*raise it with --time-budget.*TimeBudget"
              ${mf} run examples/plan_gpt.mesh --time-budget 1e-9)
cli_exit_test(plan_time_budget 1 "planning ran out of its time budget of 1e-09 s.*TimeBudget"
              ${mf} plan ${plan_file} ${plan_args} --time-budget 1e-9)
cli_exit_test(run_time_budget_enough 0 "simulated step:"
              ${mf} run examples/plan_gpt.mesh --time-budget 120)
cli_exit_test(time_budget_not_positive 2 "invalid value '0' for --time-budget"
              ${mf} run examples/plan_gpt.mesh --time-budget 0)
cli_exit_test(solve_stages_budget 0 "cost 5 = sum 2 \\+ \\(4 - 1\\) x max 1  \\(2 stages on 1x2 devices\\)"
              ${mf} solve-stages tests/cli/data/two_layers.json --time-budget 60)
cli_exit_test(solve_stages_json_optimal 0 "\"optimal\":true"
              ${mf} solve-stages tests/cli/data/two_layers.json --json)
cli_exit_test(solve_stages_bad_budget 2 "--time-budget needs a positive number of seconds"
              ${mf} solve-stages tests/cli/data/two_layers.json --time-budget -1)

# MESHFLOW_CPU_GEMM picks the cpu backend's sgemm (docs/runtime.md, "GEMM"):
# OpenBLAS on request; an unknown value stops training naming the variable.
set(one_step tests/cli/data/train_one_step.mesh)
cli_exit_test(gemm_openblas 0 "trained 1 step"
              ${CMAKE_COMMAND} -E env MESHFLOW_CPU_GEMM=openblas ${mf} run ${one_step})
cli_exit_test(gemm_unknown 1 "MESHFLOW_CPU_GEMM is 'fast'; expected auto, own or openblas"
              ${CMAKE_COMMAND} -E env MESHFLOW_CPU_GEMM=fast ${mf} run ${one_step})
