"""The confinement of learners' kernels during grading (Linux); it knows nothing of grading.

sandbox     the whole design, and the script the manager and the launcher run as
session     one grading run's sandbox: the manager, the kernelspec, the kernels' uids and folders
manager     the sandbox manager: profiles, cgroups, warm kernels, the wall-clock limit
warmkernel  the kernel's side: imports inside the confinement, then one learner's IPython kernel
launcher    what jupyter_client starts as "the kernel": it asks the manager for one
probes      which confinement this machine allows, tried on throw-away kernels
bwrap       a kernel's world built by bubblewrap
namespaces  the hand-written confinement where bubblewrap is missing
limits      memory, processes, CPU time, files
wire        one message per JSON line over unix sockets, file descriptors beside them
"""
