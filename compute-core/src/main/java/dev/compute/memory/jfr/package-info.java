/**
 * The pool's events for JDK Flight Recorder, so that the JDK's own tools ({@code jfr print}, JDK Mission Control)
 * see backend allocations and frees, out-of-memory, trims and leaks without the Actuator endpoint. Every manager
 * emits them ({@link dev.compute.memory.jfr.JfrMemoryEvents}); they cost nothing while no recording takes them.
 */
@NullMarked
package dev.compute.memory.jfr;

import org.jspecify.annotations.NullMarked;
