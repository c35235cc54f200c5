package rest

import "strings"

// table is every route of the API (docs/REST.md lists the same). The dashboard's
// assets are not routes: ServeHTTP hands /web/ to Config.Web.
func (s *Server) table() []route {
	get := func(h handler) map[string]handler { return map[string]handler{"GET": h} }
	r := func(path string, methods map[string]handler) route {
		return route{segs: strings.Split(strings.Trim(path, "/"), "/"), methods: methods}
	}
	return []route{
		r("/config", get(s.getConfig)),
		r("/overview", get(s.getOverview)),
		r("/taskmanagers", get(s.getTaskManagers)),
		r("/taskmanagers/:tm", get(s.getTaskManager)),
		r("/taskmanagers/:tm/metrics", get(s.getTaskManagerMetrics)),
		r("/taskmanagers/:tm/logs", get(s.getTaskManagerLogs)),

		r("/modules", map[string]handler{"GET": s.getModules, "POST": s.postModule}),
		r("/modules/:digest/run", map[string]handler{"POST": s.postRun}),

		r("/jobs", get(s.getJobs)),
		r("/jobs/overview", get(s.getJobsOverview)),
		r("/jobs/:job", map[string]handler{"GET": s.getJob, "PATCH": s.patchJob}),
		r("/jobs/:job/plan", get(s.getPlan)),
		r("/jobs/:job/exceptions", get(s.getExceptions)),
		r("/jobs/:job/accumulators", get(s.getAccumulators)),
		r("/jobs/:job/checkpoints", get(s.getCheckpoints)),
		r("/jobs/:job/checkpoints/config", get(s.getCheckpointConfig)),
		r("/jobs/:job/checkpoints/details/:cp", get(s.getCheckpointDetails)),
		r("/jobs/:job/savepoints", map[string]handler{"POST": s.postSavepoint}),
		r("/jobs/:job/savepoints/:op", get(s.getOperation(opSavepoint))),
		r("/jobs/:job/stop", map[string]handler{"POST": s.postStop}),
		r("/jobs/:job/rescaling", map[string]handler{"PATCH": s.patchRescaling}),
		r("/jobs/:job/rescaling/:op", get(s.getOperation(opRescale))),
		r("/jobs/:job/vertices/:vertex", get(s.getVertex)),
		r("/jobs/:job/vertices/:vertex/subtasks", get(s.getSubtasks)),
		r("/jobs/:job/vertices/:vertex/backpressure", get(s.getBackpressure)),
		r("/jobs/:job/vertices/:vertex/watermarks", get(s.getWatermarks)),
		r("/jobs/:job/vertices/:vertex/flamegraph", get(s.getFlameGraph)),
		r("/jobs/:job/logs", get(s.getJobLogs)),
		r("/jobs/:job/stacks", get(s.getStacks)),
	}
}
