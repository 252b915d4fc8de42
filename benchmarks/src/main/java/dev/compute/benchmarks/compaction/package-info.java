/** The {@code compaction} benchmark: what compaction gives back, and what it costs, against a trim alone. */
@NullMarked
package dev.compute.benchmarks.compaction;

import org.jspecify.annotations.NullMarked;
