package dev.compute.memory.manager;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.resource.ResourceAdaptor;
import java.util.List;

/** What an application plugs into a manager, beside its settings: listeners, out-of-memory handlers and resource adaptors, in order. */
public record ManagerExtensions(List<MemoryEventListener> listeners, List<OutOfMemoryHandler> outOfMemoryHandlers,
                                List<ResourceAdaptor> resourceAdaptors) {

    public ManagerExtensions {
        listeners = List.copyOf(listeners);
        outOfMemoryHandlers = List.copyOf(outOfMemoryHandlers);
        resourceAdaptors = List.copyOf(resourceAdaptors);
    }
}
