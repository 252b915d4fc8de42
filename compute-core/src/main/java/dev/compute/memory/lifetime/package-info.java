/**
 * A buffer's life, apart from the manager: {@link dev.compute.memory.lifetime.BufferCore} (what a buffer is, its
 * lifecycle and the one door every use of its memory passes), {@link dev.compute.memory.lifetime.Coherence} (which
 * copy is newer, syncs and the host mirror), {@link dev.compute.memory.lifetime.WorkInFlight} (device work queued on
 * the memory, and the bounded waits for it), the holds of ops and copies, the copies, views and accesses that use it, the relocation compaction
 * asks of it, the scopes that hold it open and the leak detector. It knows the manager only through
 * {@link dev.compute.memory.lifetime.BufferHost}. Public only so that the API package can use it: not an API, and
 * free to change.
 */
@NullMarked
package dev.compute.memory.lifetime;

import org.jspecify.annotations.NullMarked;
