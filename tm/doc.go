// Package tm is the TaskManager: it offers slots to the ResourceManager, runs
// deployed tasks in wasmhost sandboxes, moves records between tasks (in memory
// inside the process, over the data port across TaskManagers) and reports task
// states to each task's JobMaster.
//
// Only tm/rpc imports idl/kitex_gen. It must not import jm.
package tm
