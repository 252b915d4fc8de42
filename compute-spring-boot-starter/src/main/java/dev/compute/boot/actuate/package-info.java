/**
 * What Actuator, health and Micrometer show of the memory: the endpoint, the health contributor and the meters in
 * their own packages, and, here, the one snapshot of the figures they all read ({@link RecentMemoryStatistics}).
 */
@NullMarked
package dev.compute.boot.actuate;

import org.jspecify.annotations.NullMarked;
