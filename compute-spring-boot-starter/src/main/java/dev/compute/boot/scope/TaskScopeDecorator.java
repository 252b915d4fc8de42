package dev.compute.boot.scope;

import dev.compute.memory.ViewScope;
import org.springframework.core.task.TaskDecorator;

/**
 * Runs each task of Spring Boot's task executors and schedulers (which compose every {@link TaskDecorator} bean) in a
 * {@link ViewScope}: the views a task takes end when it returns, even if its pool thread then idles for good.
 */
public final class TaskScopeDecorator implements TaskDecorator {

    @Override
    public Runnable decorate(Runnable task) {
        return ViewScope.wrap(task);
    }
}
