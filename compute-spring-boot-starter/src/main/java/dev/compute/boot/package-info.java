/**
 * Spring Boot auto-configuration of the {@link dev.compute.memory.UnifiedMemoryManager} bean from the
 * {@code compute.*} properties. Actuator, health and metrics live in {@code dev.compute.boot.actuate}; the
 * failure analyzers that explain a start-up that failed in {@code dev.compute.boot.diagnostics}.
 */
@NullMarked
package dev.compute.boot;

import org.jspecify.annotations.NullMarked;
