/**
 * Recording allocations and frees as they happen, as PyTorch's {@code _record_memory_history} and RMM's logging
 * adaptor do: {@link dev.compute.memory.recording.RecordingResource} at the top of each location's chain tells an
 * {@link dev.compute.memory.recording.AllocationRecorder}, which keeps a bounded
 * {@link dev.compute.memory.recording.AllocationTrace} that the trace replayer reads. Start and stop it through
 * {@link dev.compute.memory.UnifiedMemoryManager#startRecording}.
 */
@NullMarked
package dev.compute.memory.recording;

import org.jspecify.annotations.NullMarked;
