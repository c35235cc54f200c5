// Package watermark is the logic of event-time progress, without any I/O:
// a source's watermark generator per split (bounded out-of-orderness or
// monotonous, as Flink's WatermarkStrategy), the merge of a source
// subtask's splits with idleness (Splits), and the merge of a task's input
// channels (Valve, as Flink's StatusWatermarkValve). The TaskManager feeds
// them records, events and processing time and sends what they return.
//
// It depends on the standard library and internal/jobgraph only.
package watermark
